/**
 * Checks that bytes are one JSON object (RFC 8259 syntax) without building it: an export file is
 * refused at the door (400) when it is not JSON at all, instead of queueing a job that can only
 * fail. The check is fed the body chunk by chunk as it arrives (JsonObjectSyntax), so a 200 MiB
 * upload is checked on its way to storage: one pass over the bytes, no recursion (any depth), no
 * allocation per value, and nothing kept but the open containers.
 */

const WS = new Uint8Array(256);
for (const c of [0x20, 0x09, 0x0a, 0x0d]) WS[c] = 1;
const HEX = new Uint8Array(256);
for (const c of '0123456789abcdefABCDEF') HEX[c.charCodeAt(0)] = 1;
const ESCAPES = new Uint8Array(256);
for (const c of '"\\/bfnrt') ESCAPES[c.charCodeAt(0)] = 1;
const isDigit = (c: number) => c >= 0x30 && c <= 0x39;
const LITERALS: Record<number, string> = { 0x74: 'true', 0x66: 'false', 0x6e: 'null' };

/** Where the checker is: what the next byte may be. */
enum State {
  /** Before the top-level object. */
  Start,
  /** A value is expected (after `:` or `,` in an array). */
  Value,
  /** After `[`: a value or `]`. */
  ValueOrClose,
  /** After `{`: a key or `}`. */
  KeyOrClose,
  /** After `,` in an object. */
  Key,
  Colon,
  /** After a value: `,` or the container's close. */
  After,
  /** After the top-level object: only whitespace. */
  Done,
  String,
  Escape,
  Unicode,
  /** Number parts: after `-`, after a leading `0`, in the integer digits, after `.`, in the fraction, after `e`, after its sign, in the exponent. */
  Minus,
  Zero,
  Integer,
  Dot,
  Fraction,
  E,
  ESign,
  Exponent,
  Literal,
  Failed,
}

/** The check of one file fed in chunks: `feed` each chunk in order, then `end`. */
export class JsonObjectSyntax {
  private state = State.Start;
  /** Bytes seen before the current chunk. */
  private offset = 0;
  /** Open containers, 0x7b `{` or 0x5b `[`. */
  private readonly stack: number[] = [];
  /** The string being read is a key (a `:` follows it). */
  private key = false;
  /** Hex digits still due in a `\u` escape. */
  private hex = 0;
  private literal = '';
  private literalAt = 0;
  private literalStart = 0;
  private escapeAt = 0;
  private error: string | null = null;

  /** The first problem found so far, or null. */
  get problem(): string | null {
    return this.error;
  }

  private fail(what: string, at: number): void {
    this.state = State.Failed;
    this.error = `${what} at byte ${at}`;
  }

  /** A value has ended: what may follow it. */
  private valueEnded(): void {
    this.state = this.stack.length === 0 ? State.Done : State.After;
  }

  feed(bytes: Uint8Array): this {
    const n = bytes.length;
    let i = 0;
    while (i < n && this.state !== State.Failed) {
      const c = bytes[i]!;
      const at = this.offset + i;
      switch (this.state) {
        case State.Start:
          if (WS[c]) break;
          if (c !== 0x7b) {
            this.fail('expected a JSON object ({)', at);
            break;
          }
          this.stack.push(c);
          this.state = State.KeyOrClose;
          break;
        case State.Done:
          if (!WS[c]) this.fail('unexpected data after the end of the object', at);
          break;
        case State.KeyOrClose:
        case State.Key:
          if (WS[c]) break;
          if (c === 0x22) {
            this.key = true;
            this.state = State.String;
          } else if (c === 0x7d && this.state === State.KeyOrClose) {
            this.stack.pop();
            this.valueEnded();
          } else this.fail('expected a string key', at);
          break;
        case State.Colon:
          if (WS[c]) break;
          if (c === 0x3a) this.state = State.Value;
          else this.fail('expected :', at);
          break;
        case State.Value:
        case State.ValueOrClose:
          if (WS[c]) break;
          if (c === 0x5d && this.state === State.ValueOrClose) {
            this.stack.pop();
            this.valueEnded();
          } else if (c === 0x7b) {
            this.stack.push(c);
            this.state = State.KeyOrClose;
          } else if (c === 0x5b) {
            this.stack.push(c);
            this.state = State.ValueOrClose;
          } else if (c === 0x22) {
            this.key = false;
            this.state = State.String;
          } else if (c === 0x2d) this.state = State.Minus;
          else if (c === 0x30) this.state = State.Zero;
          else if (isDigit(c)) this.state = State.Integer;
          else if (LITERALS[c]) {
            this.literal = LITERALS[c]!;
            this.literalAt = 1;
            this.literalStart = at;
            this.state = State.Literal;
          } else this.fail('unexpected character', at);
          break;
        case State.After: {
          if (WS[c]) break;
          const top = this.stack[this.stack.length - 1];
          if (c === 0x2c) this.state = top === 0x7b ? State.Key : State.Value;
          else if ((top === 0x7b && c === 0x7d) || (top === 0x5b && c === 0x5d)) {
            this.stack.pop();
            this.valueEnded();
          } else this.fail('expected , or the end of the object or array', at);
          break;
        }
        case State.String:
          // The common case in a tight loop: plain bytes of the string.
          while (i < n) {
            const b = bytes[i]!;
            if (b === 0x22 || b === 0x5c || b < 0x20) break;
            i++;
          }
          if (i === n) continue;
          if (bytes[i] === 0x22) {
            if (this.key) this.state = State.Colon;
            else this.valueEnded();
          } else if (bytes[i] === 0x5c) {
            this.escapeAt = this.offset + i;
            this.state = State.Escape;
          } else this.fail('control character in a string', this.offset + i);
          break;
        case State.Escape:
          if (c === 0x75) {
            this.hex = 4;
            this.state = State.Unicode;
          } else if (ESCAPES[c]) this.state = State.String;
          else this.fail('bad escape', this.escapeAt);
          break;
        case State.Unicode:
          if (!HEX[c]) this.fail('bad \\u escape', this.escapeAt);
          else if (--this.hex === 0) this.state = State.String;
          break;
        case State.Minus:
          if (c === 0x30) this.state = State.Zero;
          else if (isDigit(c)) this.state = State.Integer;
          else this.fail('bad number', at);
          break;
        case State.Integer:
        case State.Zero:
          if (this.state === State.Integer && isDigit(c)) break;
          if (c === 0x2e) this.state = State.Dot;
          else if (c === 0x65 || c === 0x45) this.state = State.E;
          else {
            this.valueEnded();
            continue; // this byte is read again after the number
          }
          break;
        case State.Dot:
          if (isDigit(c)) this.state = State.Fraction;
          else this.fail('bad number', at);
          break;
        case State.Fraction:
          if (isDigit(c)) break;
          if (c === 0x65 || c === 0x45) this.state = State.E;
          else {
            this.valueEnded();
            continue;
          }
          break;
        case State.E:
          if (c === 0x2b || c === 0x2d) this.state = State.ESign;
          else if (isDigit(c)) this.state = State.Exponent;
          else this.fail('bad number', at);
          break;
        case State.ESign:
          if (isDigit(c)) this.state = State.Exponent;
          else this.fail('bad number', at);
          break;
        case State.Exponent:
          if (isDigit(c)) break;
          this.valueEnded();
          continue;
        case State.Literal:
          if (c !== this.literal.charCodeAt(this.literalAt)) this.fail('unexpected character', this.literalStart);
          else if (++this.literalAt === this.literal.length) this.valueEnded();
          break;
      }
      i++;
    }
    return this.done(n);
  }

  private done(n: number): this {
    this.offset += n;
    return this;
  }

  /** The end of the file: null when it was one JSON object, otherwise where it stops being one. */
  end(): string | null {
    if (this.error) return this.error;
    const at = this.offset;
    switch (this.state) {
      case State.Done:
        return null;
      case State.Start:
        return 'the file is empty';
      case State.String:
      case State.Escape:
        return `unterminated string at byte ${at}`;
      case State.Unicode:
        return `bad \\u escape at byte ${this.escapeAt}`;
      default:
        return `unexpected end of the file at byte ${at}`;
    }
  }
}

/** Where the bytes stop being JSON, or null when they are one JSON object. */
export function jsonObjectSyntaxError(bytes: Uint8Array): string | null {
  return new JsonObjectSyntax().feed(bytes).end();
}
