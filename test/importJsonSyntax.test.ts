import { describe, expect, it } from 'vitest';
import { JsonObjectSyntax, jsonObjectSyntaxError } from '../server/features/portability/jsonSyntax.ts';

const check = (text: string) => jsonObjectSyntaxError(Buffer.from(text, 'utf8'));

/** What JSON.parse says: a JSON text whose value is an object. */
function isJsonObject(text: string): boolean {
  try {
    const v = JSON.parse(text);
    return v !== null && typeof v === 'object' && !Array.isArray(v);
  } catch {
    return false;
  }
}

describe('the import file syntax check', () => {
  it('accepts what JSON.parse reads as an object, and nothing else', () => {
    const samples = [
      '{}',
      ' \n{ }\t',
      '{"a":1}',
      '{"a":[1,2,{"b":null}],"c":"x\\u00e9\\n","d":-0.5e+10,"e":true,"f":false}',
      '{"deep":' + '['.repeat(5000) + ']'.repeat(5000) + '}',
      '{"emoji":"😀 中文"}',
      '',
      '[]',
      '1',
      '"s"',
      'null',
      '{',
      '{"a"}',
      '{"a":}',
      '{"a":1,}',
      '{"a":[1,]}',
      '{"a":01}',
      '{"a":1.}',
      '{"a":.5}',
      '{"a":1e}',
      '{"a":tru}',
      '{"a":"\t"}',
      '{"a":"\\x"}',
      '{"a":"\\u12g4"}',
      '{"a":"unterminated}',
      '{} {}',
      '{"a":1}]',
      '{"a":[}',
      '{"a":{]}',
      '{a:1}',
      "{'a':1}",
      '{"a":NaN}',
      '{"a":-}',
      '{"a":[1 2]}',
      '{"a":1 "b":2}',
    ];
    for (const text of samples) expect(check(text) === null, text.slice(0, 40)).toBe(isJsonObject(text));
  });

  it('agrees with JSON.parse on random mutations of a real-looking file', () => {
    const base = JSON.stringify({
      version: 2,
      members: [{ id: 'abcde', name: 'Robin', n: -1.5e3, ok: true, x: null }],
    });
    let seed = 42;
    const rand = (m: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % m;
    };
    const alphabet = '{}[]:,"\\ 0123456789-+.eEtrufalsn\tx';
    for (let k = 0; k < 3000; k++) {
      const chars = [...base];
      const edits = 1 + rand(3);
      for (let e = 0; e < edits; e++) {
        const at = rand(chars.length);
        const op = rand(3);
        if (op === 0) chars.splice(at, 1);
        else if (op === 1) chars.splice(at, 0, alphabet[rand(alphabet.length)]!);
        else chars[at] = alphabet[rand(alphabet.length)]!;
      }
      const text = chars.join('');
      expect(check(text) === null, text).toBe(isJsonObject(text));
    }
  });

  it('says where the file stops being JSON', () => {
    expect(check('{"a":1,}')).toBe('expected a string key at byte 7');
    expect(check('')).toBe('the file is empty');
    expect(check('[1]')).toBe('expected a JSON object ({) at byte 0');
  });
});

describe('the import file syntax check, fed in chunks as an upload arrives', () => {
  it('finds the same answer whatever the chunks (every split point, and one byte at a time)', () => {
    const samples = [
      '{"a":[1,2,{"b":null}],"c":"x\\u00e9\\n","d":-0.5e+10,"e":true,"f":false}',
      '{"emoji":"😀 中文","n":0,"m":-12.25E-3}',
      '{"a":tru}',
      '{"a":"\\u12g4"}',
      '{"a":1.}',
      '{"a":1} x',
      '{"a":"unterminated}',
      '  ',
    ];
    for (const text of samples) {
      const bytes = Buffer.from(text, 'utf8');
      const whole = jsonObjectSyntaxError(bytes);
      for (let cut = 0; cut <= bytes.length; cut++) {
        const checker = new JsonObjectSyntax().feed(bytes.subarray(0, cut)).feed(bytes.subarray(cut));
        expect(checker.end(), `${text} cut at ${cut}`).toBe(whole);
      }
      const bytewise = new JsonObjectSyntax();
      for (const b of bytes) bytewise.feed(Uint8Array.of(b));
      expect(bytewise.end(), text).toBe(whole);
    }
  });

  it('knows the problem before the end (the upload can be refused early)', () => {
    const checker = new JsonObjectSyntax().feed(Buffer.from('{"a":1,,'));
    expect(checker.problem).toBe('expected a string key at byte 7');
    expect(checker.feed(Buffer.from('"b":2}')).end()).toBe('expected a string key at byte 7');
  });
});
