/**
 * A small seeded PRNG (sfc32) so a fuzz run is reproducible from its seed. Every operation gets its
 * own stream derived from the run seed and its operationId, so `--only <op>` replays the same
 * requests for that operation as a full run does.
 */

/** 32-bit FNV-1a of a string, used to turn seeds and names into PRNG state. */
function fnv1a(text: string, basis = 0x811c9dc5): number {
  let h = basis >>> 0;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

export class Prng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: string) {
    this.a = fnv1a(seed, 0x811c9dc5);
    this.b = fnv1a(seed, 0x9e3779b9);
    this.c = fnv1a(seed, 0x85ebca6b);
    this.d = 1;
    for (let i = 0; i < 16; i++) this.nextUint32();
  }

  /** A fresh, independent stream for `label` (same seed and label, same stream). */
  fork(label: string): Prng {
    return new Prng(
      `${this.a.toString(16)}:${this.b.toString(16)}:${this.c.toString(16)}:${this.d.toString(16)}:${label}`,
    );
  }

  nextUint32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** [0, 1) */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /** An integer in [min, max] (inclusive); exact for spans up to 2^53. */
  int(min: number, max: number): number {
    if (max <= min) return min;
    const span = max - min + 1;
    if (span <= 4294967296) return min + Math.floor(this.next() * span);
    const hi = this.nextUint32() * 2097152 + (this.nextUint32() >>> 11); // 53 random bits
    return min + Math.floor((hi / 9007199254740992) * span);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[this.int(0, items.length - 1)]!;
  }

  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(0, i);
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }

  /** A random version-4 UUID from this stream. */
  uuid(): string {
    const hex = Array.from({ length: 32 }, () => this.int(0, 15).toString(16));
    hex[12] = '4';
    hex[16] = '89ab'[this.int(0, 3)]!;
    const s = hex.join('');
    return `${s.slice(0, 8)}-${s.slice(8, 12)}-${s.slice(12, 16)}-${s.slice(16, 20)}-${s.slice(20)}`;
  }
}

/** A seed for runs that were given none: printed, so the run can be replayed. */
export function randomSeed(): string {
  return Math.floor(Math.random() * 2 ** 32)
    .toString(16)
    .padStart(8, '0');
}
