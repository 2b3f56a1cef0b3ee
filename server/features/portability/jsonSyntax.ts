/**
 * Checks that bytes are one JSON object (RFC 8259 syntax) without building it: an export file is
 * refused at the door (400) when it is not JSON at all, instead of queueing a job that can only
 * fail. One pass over the bytes, no recursion (any depth), no allocation per value, so a 200 MiB
 * file costs a fraction of a JSON.parse and no memory.
 */

const WS = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) WS[c] = 1;
const HEX = new Uint8Array(256);
for (const c of '0123456789abcdefABCDEF') HEX[c.charCodeAt(0)] = 1;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;

/** Where the bytes stop being JSON, or null when they are one JSON object. */
export function jsonObjectSyntaxError(bytes: Uint8Array): string | null {
  const n = bytes.length;
  let i = 0;
  const skipWs = () => {
    while (i < n && WS[bytes[i]!]) i++;
  };
  const fail = (what: string) => `${what} at byte ${i}`;
  /** Containers open: 0x7b `{` or 0x5b `[`. */
  const stack: number[] = [];
  skipWs();
  if (bytes[i] !== 0x7b) return i >= n ? 'the file is empty' : fail('expected a JSON object ({)');
  // States: a value is expected (after `[`, `,` in an array, `:`); or a key (after `{`, `,` in an object).
  let expectValue = true;
  let expectKey = false;
  let allowClose = false;
  for (;;) {
    skipWs();
    if (i >= n) return stack.length > 0 || expectValue || expectKey ? fail('unexpected end of the file') : null;
    const c = bytes[i]!;
    if (expectKey) {
      if (c === 0x7d && allowClose) {
        stack.pop();
        i++;
        expectKey = false;
        expectValue = false;
      } else if (c === 0x22) {
        const err = scanString();
        if (err) return err;
        skipWs();
        if (bytes[i] !== 0x3a) return fail('expected :');
        i++;
        expectKey = false;
        expectValue = true;
        allowClose = false;
        continue;
      } else return fail('expected a string key');
    } else if (expectValue) {
      if (c === 0x5d && allowClose && stack[stack.length - 1] === 0x5b) {
        stack.pop();
        i++;
        expectValue = false;
      } else if (c === 0x7b || c === 0x5b) {
        stack.push(c);
        i++;
        allowClose = true;
        if (c === 0x7b) {
          expectKey = true;
          expectValue = false;
        }
        continue;
      } else if (c === 0x22) {
        const err = scanString();
        if (err) return err;
        expectValue = false;
      } else if (c === 0x2d || isDigit(c)) {
        const err = scanNumber();
        if (err) return err;
        expectValue = false;
      } else if (!scanLiteral()) return fail('unexpected character');
      else expectValue = false;
    } else {
      // After a value: `,` or the container's close.
      const top = stack[stack.length - 1];
      if (top === undefined) return fail('unexpected data after the end of the object');
      if (c === 0x2c) {
        i++;
        allowClose = false;
        if (top === 0x7b) expectKey = true;
        else expectValue = true;
        continue;
      }
      if ((top === 0x7b && c === 0x7d) || (top === 0x5b && c === 0x5d)) {
        stack.pop();
        i++;
        continue;
      }
      return fail('expected , or the end of the object or array');
    }
    allowClose = false;
    if (stack.length === 0) {
      skipWs();
      return i < n ? fail('unexpected data after the end of the object') : null;
    }
  }

  function scanString(): string | null {
    i++; // opening quote
    while (i < n) {
      const c = bytes[i]!;
      if (c === 0x22) {
        i++;
        return null;
      }
      if (c < 0x20) return fail('control character in a string');
      if (c === 0x5c) {
        const e = bytes[i + 1];
        if (e === 0x75) {
          for (let k = 2; k < 6; k++) if (!HEX[bytes[i + k] ?? 0]) return fail('bad \\u escape');
          i += 6;
          continue;
        }
        if (e === undefined || !'"\\/bfnrt'.includes(String.fromCharCode(e))) return fail('bad escape');
        i += 2;
        continue;
      }
      i++;
    }
    return fail('unterminated string');
  }

  function scanNumber(): string | null {
    if (bytes[i] === 0x2d) i++;
    if (bytes[i] === 0x30) i++;
    else if (isDigit(bytes[i] ?? 0)) while (isDigit(bytes[i] ?? 0)) i++;
    else return fail('bad number');
    if (bytes[i] === 0x2e) {
      i++;
      if (!isDigit(bytes[i] ?? 0)) return fail('bad number');
      while (isDigit(bytes[i] ?? 0)) i++;
    }
    if (bytes[i] === 0x65 || bytes[i] === 0x45) {
      i++;
      if (bytes[i] === 0x2b || bytes[i] === 0x2d) i++;
      if (!isDigit(bytes[i] ?? 0)) return fail('bad number');
      while (isDigit(bytes[i] ?? 0)) i++;
    }
    return null;
  }

  function scanLiteral(): boolean {
    for (const word of ['true', 'false', 'null']) {
      let k = 0;
      while (k < word.length && bytes[i + k] === word.charCodeAt(k)) k++;
      if (k === word.length) {
        i += k;
        return true;
      }
    }
    return false;
  }
}
