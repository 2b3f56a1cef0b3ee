/** Compact sets of ids: a native archive's uuids, an export file's string ids. */
import { createHash } from 'node:crypto';

/**
 * A set of 16-byte keys at 34 bytes each at most (open addressing over one byte array, half full at
 * most), for ids that may number millions: `keyOf` turns a value into its key.
 */
class KeySet {
  private slots = new Uint8Array(16 * 1024);
  private capacity = 1024;
  private used = new Uint8Array(1024);
  size = 0;

  private slotOf(bytes: Uint8Array): number {
    // fmix32 of the xor of the four words: time-ordered uuids spread as well as random ones.
    let h = 0;
    for (let i = 0; i < 16; i += 4)
      h ^= (bytes[i]! << 24) | (bytes[i + 1]! << 16) | (bytes[i + 2]! << 8) | bytes[i + 3]!;
    h ^= h >>> 16;
    h = Math.imul(h, 0x85ebca6b);
    h ^= h >>> 13;
    h = Math.imul(h, 0xc2b2ae35);
    h ^= h >>> 16;
    return (h >>> 0) & (this.capacity - 1);
  }

  /** The slot holding `bytes`, or the empty slot where it would go. */
  private find(bytes: Uint8Array): number {
    let slot = this.slotOf(bytes);
    for (;;) {
      if (!this.used[slot]) return slot;
      let same = true;
      for (let i = 0; i < 16 && same; i++) same = this.slots[slot * 16 + i] === bytes[i];
      if (same) return slot;
      slot = (slot + 1) & (this.capacity - 1);
    }
  }

  private place(bytes: Uint8Array): void {
    const slot = this.find(bytes);
    if (this.used[slot]) return;
    this.used[slot] = 1;
    this.slots.set(bytes, slot * 16);
    this.size++;
  }

  constructor(private readonly keyOf: (value: string) => Uint8Array) {}

  add(value: string): void {
    if (this.size * 2 >= this.capacity) {
      const { slots, used, capacity } = this;
      this.capacity *= 2;
      this.slots = new Uint8Array(this.capacity * 16);
      this.used = new Uint8Array(this.capacity);
      this.size = 0;
      for (let s = 0; s < capacity; s++) if (used[s]) this.place(slots.subarray(s * 16, s * 16 + 16));
    }
    this.place(this.keyOf(value));
  }

  has(value: string): boolean {
    return this.used[this.find(this.keyOf(value))] === 1;
  }
}

/** Uuids, by their 16 bytes: the ids of an archive's rows. */
export class UuidSet extends KeySet {
  constructor() {
    super((uuid) => Buffer.from(uuid.replace(/-/g, ''), 'hex'));
  }
}

/**
 * Any strings, by the first 16 bytes of their SHA-256 (two different strings meet with a chance
 * of about 2^-128 a pair): the source ids of a streamed collection, for duplicates.
 */
export class StringIdSet extends KeySet {
  constructor() {
    super((id) => createHash('sha256').update(id).digest().subarray(0, 16));
  }
}
