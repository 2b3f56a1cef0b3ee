/** Helpers both source parsers use. */

/** A JSON object (not null, not an array). */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The text cut to `max` code points, as the contract's maxLength counts them (never inside a surrogate pair). */
export function cut(value: string, max: number): string {
  if (value.length <= max) return value; // UTF-16 units are never fewer than code points
  let units = 0;
  for (let points = 0; points < max && units < value.length; points++) {
    units += (value.codePointAt(units) as number) > 0xffff ? 2 : 1;
  }
  return value.slice(0, units);
}
