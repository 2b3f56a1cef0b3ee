/**
 * The ids of a native import: every id of an exported row gets a new one in the importing account,
 * derived from the account and the old id (so importing the same archive again gives every row the
 * id it got the first time), except rows matched to one the account has already (its first side
 * system, a built-in bucket: `overrides`). The exported account's id becomes the importing
 * account's; any other uuid (another account, a row that no longer existed when the export ran, a
 * uuid someone wrote in a note) is left as it is, except in the account's object keys.
 */
import { createHash } from 'node:crypto';
import { UuidSet } from './idSet.ts';

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
const UUIDS = /[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}/g;

export const isUuid = (value: unknown): value is string => typeof value === 'string' && UUID.test(value);

export class Remapper {
  /** Archive id → an existing row's id in the importing account. */
  readonly overrides = new Map<string, string>();

  constructor(
    readonly source: string,
    readonly target: string,
    private readonly ids: UuidSet,
  ) {}

  /** The new id of an id of the account's data, whether or not the archive holds its row. */
  id(value: string): string {
    const id = value.toLowerCase();
    if (id === this.source) return this.target;
    const override = this.overrides.get(id);
    if (override) return override;
    const h = createHash('sha256').update(`ada-native-import\u0000${this.target}\u0000${id}`).digest();
    h[6] = (h[6]! & 0x0f) | 0x80; // version 8: derived by this server's own rule (RFC 9562)
    h[8] = (h[8]! & 0x3f) | 0x80;
    const hex = h.subarray(0, 16).toString('hex');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  /** The new id when `value` is the exported account or the id of a row of the archive; undefined otherwise. */
  known(value: string): string | undefined {
    const id = value.toLowerCase();
    return id === this.source || this.overrides.has(id) || this.ids.has(id) ? this.id(id) : undefined;
  }

  /**
   * A string with every known id in it replaced (mentions, ids inside JSON). An object key of the
   * exported account (`u/<account>/…`) gets every id in it mapped, known or not (a space icon's
   * key names the upload it came from): the importing account's copy never shares an object.
   */
  text(value: string): string {
    if (value.length < 36) return value;
    if (value.startsWith(`u/${this.source}/`)) return value.replace(UUIDS, (match) => this.id(match));
    return value.replace(UUIDS, (match) => this.known(match) ?? match);
  }

  /** Any JSON value with every known id in its strings (and object keys) replaced. */
  deep(value: unknown): unknown {
    if (typeof value === 'string') return this.text(value);
    if (Array.isArray(value)) return value.map((v) => this.deep(v));
    if (value !== null && typeof value === 'object')
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [this.text(k), this.deep(v)]));
    return value;
  }
}
