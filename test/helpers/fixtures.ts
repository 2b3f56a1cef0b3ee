/** Small builders shared by tests: they go through the public API, never the database. */
import { expect } from 'vitest';
import type { ApiClient } from '../../client/index.ts';

export async function createMember(
  api: ApiClient,
  name = 'Member',
  extra: Record<string, unknown> = {},
): Promise<string> {
  const { data, error, response } = await api.POST('/api/v1/members', { body: { name, ...extra } });
  expect(response.status, JSON.stringify(error)).toBe(201);
  return data!.id;
}

export async function createSide(api: ApiClient, name = 'Side'): Promise<string> {
  const { data, error, response } = await api.POST('/api/v1/systems/side-systems', { body: { name } });
  expect(response.status, JSON.stringify(error)).toBe(201);
  return data!._id;
}

export async function createSub(
  api: ApiClient,
  sideSystemId: string,
  linkedMemberId: string,
  extra: Record<string, unknown> = {},
): Promise<string> {
  const { data, error, response } = await api.POST('/api/v1/systems/sub-systems', {
    body: { sideSystemId, linkedMemberId, name: 'Sub', ...extra },
  });
  expect(response.status, JSON.stringify(error)).toBe(201);
  return data!._id;
}

export async function activeSide(api: ApiClient): Promise<string> {
  const { data } = await api.GET('/api/v1/systems');
  return data!.active.sideSystemId;
}

export async function createFolder(
  api: ApiClient,
  name = 'Folder',
  extra: Record<string, unknown> = {},
): Promise<string> {
  const { data, error, response } = await api.POST('/api/v1/folders', { body: { name, ...extra } });
  expect(response.status, JSON.stringify(error)).toBe(201);
  return data!.id;
}

export async function createGroup(
  api: ApiClient,
  name = 'Group',
  extra: Record<string, unknown> = {},
): Promise<string> {
  const { data, error, response } = await api.POST('/api/v1/groups', { body: { name, ...extra } });
  expect(response.status, JSON.stringify(error)).toBe(201);
  return data!.id;
}

export const UNKNOWN_ID = '00000000-0000-4000-8000-00000000dead';

export async function setActive(
  api: ApiClient,
  sideSystemId: string,
  subSystemId: string | null = null,
): Promise<void> {
  const { error, response } = await api.PATCH('/api/v1/systems/active', { body: { sideSystemId, subSystemId } });
  expect(response.status, JSON.stringify(error)).toBe(200);
}

export async function createEntry(
  api: ApiClient,
  content = 'A note',
  extra: Record<string, unknown> = {},
): Promise<string> {
  const { data, error, response } = await api.POST('/api/v1/entries', { body: { content, ...extra } });
  expect(response.status, JSON.stringify(error)).toBe(201);
  return data!.id;
}

/** Puts the member in the front and returns the id of its open session. */
export async function startFronting(api: ApiClient, memberId: string): Promise<string> {
  const { error, response } = await api.POST('/api/v1/front/members', { body: { memberId } });
  expect(response.status, JSON.stringify(error)).toBe(204);
  const { data } = await api.GET('/api/v1/front');
  const session = data!.activeSessions.find((s) => s.memberId === memberId);
  expect(session, 'open front session').toBeDefined();
  return session!._id;
}
