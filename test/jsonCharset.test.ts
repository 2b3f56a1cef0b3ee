/**
 * JSON request bodies are UTF-8 (RFC 8259 §8.1). A `Content-Type` that declares any other charset is
 * 415 before the body is read: body-parser would otherwise decode UTF-7 (`+ADw-script+AD4-` becomes
 * `<script>`) and UTF-16. No charset, or `utf-8` in any case and quoted or not, is accepted.
 */
import { describe, expect, it } from 'vitest';
import { bearer, useServer, type TestUser } from './helpers/server.ts';

const server = useServer();

function createMember(u: TestUser, contentType: string, body: Buffer | string): Promise<Response> {
  return server.fetch('/api/v1/members', {
    method: 'POST',
    headers: { ...bearer(u.apiKey), 'Content-Type': contentType },
    body: typeof body === 'string' ? body : new Uint8Array(body),
  });
}

async function memberNames(u: TestUser): Promise<string[]> {
  const { data, response } = await u.api.GET('/api/v1/members');
  expect(response.status).toBe(200);
  return data!.map((m) => m.name).sort();
}

const UTF7 = '{"name":"+ADw-script+AD4-"}';
const utf16le = (text: string) => Buffer.from(text, 'utf16le');
const BOM_LE = Buffer.from([0xff, 0xfe]);

describe('charset of JSON request bodies', () => {
  const refused: Array<[string, string, Buffer | string]> = [
    ['utf-7', 'application/json; charset=utf-7', UTF7],
    ['UTF-7, quoted', 'application/json; charset="UTF-7"', UTF7],
    ['utf-7 after another parameter', 'application/json; foo=bar; charset=utf-7', UTF7],
    ['utf-16 (with a byte order mark)', 'application/json; charset=utf-16', Buffer.concat([BOM_LE, utf16le(UTF7)])],
    ['utf-16le', 'application/json; charset=utf-16le', utf16le('{"name":"<script>"}')],
    ['latin1', 'application/json; charset=latin1', Buffer.from('{"name":"Zoë"}', 'latin1')],
    ['iso-8859-1', 'application/json;charset=ISO-8859-1', Buffer.from('{"name":"Zoë"}', 'latin1')],
  ];

  it.each(refused)('%s: 415 UNSUPPORTED_MEDIA_TYPE, nothing stored', async (_label, contentType, body) => {
    const u = await server.user();
    const res = await createMember(u, contentType, body);
    expect(res.status).toBe(415);
    const charset = /charset="?([^";]+)/i.exec(contentType)![1]!.toLowerCase();
    expect(await res.json()).toEqual({
      code: 'UNSUPPORTED_MEDIA_TYPE',
      message: `Request body must be UTF-8 JSON (RFC 8259); charset "${charset}" is not supported`,
    });
    expect(await memberNames(u)).toEqual([]);
  });

  it('no charset, charset=utf-8, "UTF-8" and a quoted "utf-8" are accepted and decoded as UTF-8', async () => {
    const u = await server.user();
    const accepted: Array<[string, string]> = [
      ['application/json', 'Zoë'],
      ['application/json; charset=utf-8', '<script>'],
      ['application/json; charset=UTF-8', '+ADw-script+AD4-'],
      ['application/json; charset="utf-8"', 'Ŕobin'],
      ['application/json;charset=Utf-8', 'Sam'],
    ];
    for (const [contentType, name] of accepted) {
      const res = await createMember(u, contentType, Buffer.from(JSON.stringify({ name }), 'utf8'));
      expect(res.status, `${contentType}: ${await res.clone().text()}`).toBe(201);
    }
    expect(await memberNames(u)).toEqual(accepted.map(([, name]) => name).sort());
  });
});
