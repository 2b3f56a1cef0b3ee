/** The API-key scopes of the contract (each operation's security requirement names one) and their levels. */
export const SCOPES = [
  'members',
  'groups',
  'entries',
  'front',
  'appearance',
  'customFields',
  'trash',
  'memberStatuses',
  'systems',
  'messaging',
  'privacyBuckets',
  'terminology',
  'friends',
  'social',
  'guestbook',
  'poll',
  'webhooks',
] as const;
export type Scope = (typeof SCOPES)[number];
export type ScopeLevel = 'read' | 'read_write';
export type ScopeMap = Partial<Record<Scope, ScopeLevel>>;

/** Whether a key's scopes grant `scope` at `level` (read_write includes read). */
export function hasScope(scopes: ScopeMap, scope: Scope, level: ScopeLevel): boolean {
  const granted = scopes[scope];
  return granted === 'read_write' || (granted === 'read' && level === 'read');
}
