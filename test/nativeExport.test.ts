import { describe, expect, it } from 'vitest';
import { bearer, type TestUser, useServer } from './helpers/server.ts';
import { createMember } from './helpers/fixtures.ts';

const server = useServer();

async function exportOf(user: TestUser) {
  const res = await server.fetch('/api/v1/exports', { method: 'POST', headers: bearer(user.apiKey) });
  expect(res.status).toBe(202);
  const { id } = (await res.json()) as { id: string };
  await server.runtime.jobs.runDue();
  const { data } = await user.api.GET('/api/v1/exports/{exportId}', { params: { path: { exportId: id } } });
  return data!;
}

describe('smoke', () => {
  it('exports and imports', async () => {
    const user = await server.user();
    await createMember(user.api, 'Robin');
    const done = await exportOf(user);
    console.log(JSON.stringify(done, null, 1).slice(0, 3000));
    expect(done.status).toBe('succeeded');
    const tar = Buffer.from(await (await server.fetch(done.downloadUrl!)).arrayBuffer());
    const copy = await server.user();
    const res = await server.fetch('/api/v1/imports?source=native', {
      method: 'POST',
      headers: { ...bearer(copy.apiKey), 'Content-Type': 'application/x-tar' },
      body: tar,
    });
    console.log(res.status, await res.clone().text());
    await server.runtime.jobs.runDue();
    const { data } = await copy.api.GET('/api/v1/imports', {});
    console.log(JSON.stringify(data, null, 1));
    const members = await copy.api.GET('/api/v1/members', {});
    console.log(JSON.stringify(members.data));
  });
});
