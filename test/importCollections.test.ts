/** The streamed reader of a collections file (server/features/portability/collections.ts) reads what JSON.parse reads. */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { materialise } from '../server/features/portability/bundle.ts';
import { type Collections, CollectionsFile, collectionsOf } from '../server/features/portability/collections.ts';
import {
  PLURALKIT_REVIVER,
  parsePluralKit,
  parsePluralKitFile,
} from '../server/features/portability/sources/pluralKit.ts';
import { parseSimplyPlural, parseSimplyPluralFile } from '../server/features/portability/sources/simplyPlural.ts';

const dir = mkdtempSync(join(tmpdir(), 'collections-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

/** Everything a parser can ask of the collections, as plain data. */
function read(c: Collections) {
  return c.keys().map((key) => {
    const docs = c.documents(key);
    return {
      key,
      has: c.has(key),
      count: c.count(key),
      docs: docs ? [...docs] : null,
      value: docs ? null : c.value(key),
    };
  });
}

async function streamed(text: string, chunkSize: number) {
  const path = join(dir, `f${++n}.json`);
  writeFileSync(path, text);
  const file = await CollectionsFile.open(path, Buffer.byteLength(text), { chunkSize });
  try {
    return read(file);
  } finally {
    file.close();
  }
}

const SAMPLES = [
  '{}',
  ' { "a" : [ ] , "b" : { } } ',
  '{"members":[{"_id":"m1","name":"Robin, \\"the\\" [first]","info":{"x":[1,{"y":"}"}]}},{"_id":"m2"}],"n":12.5e3,"s":"a,b}","t":true,"z":null}',
  '{"map":{"id1":{"name":"A"},"id:2":{"name":"B, {C}"}},"arr":[1,"two",[3],{"four":4},null]}',
  '{"emoji":[{"name":"😀 中文 \\u00e9"}],"esc":"\\\\","dup":[1],"dup":[2,3]}',
  '{"k\\"ey":[ {"a":1} ,\n\t{"b":2}\n]}',
];

describe('a collections file read a document at a time', () => {
  it('gives the keys, counts, documents and values JSON.parse gives, however the file is cut into chunks', async () => {
    for (const text of SAMPLES) {
      const expected = read(collectionsOf(JSON.parse(text)));
      for (const size of [1, 2, 3, 7, 64, 1 << 20])
        expect(await streamed(text, size), `${text} in chunks of ${size}`).toEqual(expected);
    }
  });

  it('reads the Simply Plural fixtures as JSON.parse does', async () => {
    for (const name of ['simply-plural-export.json', 'simply-plural-legacy.json']) {
      const text = readFileSync(join(import.meta.dirname, 'fixtures/imports', name), 'utf8');
      const expected = read(collectionsOf(JSON.parse(text)));
      for (const size of [5, 4096]) expect(await streamed(text, size), name).toEqual(expected);
    }
  });

  it('refuses a file that is not one JSON object', async () => {
    for (const text of ['[1]', '{"a":[1]', '']) await expect(streamed(text, 4)).rejects.toThrow(/not one JSON object/);
  });
});

describe('the parsers on a file read a document at a time', () => {
  const fixture = (name: string) => readFileSync(join(import.meta.dirname, 'fixtures/imports', name), 'utf8');
  const open = (text: string, options: { chunkSize: number; reviver?: typeof PLURALKIT_REVIVER }) => {
    const path = join(dir, `p${++n}.json`);
    writeFileSync(path, text);
    return CollectionsFile.open(path, Buffer.byteLength(text), options);
  };

  it('Simply Plural: the same bundle as from the parsed file', async () => {
    for (const name of ['simply-plural-export.json', 'simply-plural-legacy.json']) {
      const text = fixture(name);
      for (const chunkSize of [7, 1 << 20]) {
        const file = await open(text, { chunkSize });
        try {
          expect(materialise(parseSimplyPluralFile(file)), name).toEqual(parseSimplyPlural(JSON.parse(text)));
        } finally {
          file.close();
        }
      }
    }
  });

  it('PluralKit: the same bundle as from the whole text, Discord ids only counted, switches one at a time', async () => {
    const withLinks = JSON.parse(fixture('pluralkit-system-v2.json')) as Record<string, unknown>;
    const texts = [
      fixture('pluralkit-system-v1.json'),
      fixture('pluralkit-system-v2.json'),
      // Discord ids above 2^53 at the top level and inside a member; switches not a list; none at all.
      JSON.stringify({ ...withLinks, accounts: [] }).replace('"accounts":[]', '"accounts":[466378653216014359,1]'),
      JSON.stringify({ ...withLinks, switches: { a: 1 } }),
      JSON.stringify({ ...withLinks, switches: null }),
    ];
    for (const text of texts) {
      for (const chunkSize of [11, 1 << 20]) {
        const file = await open(text, { chunkSize, reviver: PLURALKIT_REVIVER });
        try {
          expect(materialise(parsePluralKitFile(file)), text.slice(0, 60)).toEqual(parsePluralKit(text));
        } finally {
          file.close();
        }
      }
    }
    expect(parsePluralKit(texts[2]!).tally.accounts).toEqual({ skipped: 2, failed: 0 });
  });
});
