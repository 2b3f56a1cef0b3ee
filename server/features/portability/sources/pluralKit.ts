/**
 * PluralKit's `pk;export` file (`system.json`, version 1 or 2) mapped onto an ImportBundle. The
 * format, field by field, is described in shared/formats/import-sources.md section 2.
 *
 * What PluralKit has and this service has no place for is kept as data in the member's `extra`
 * (hid, proxy tags, birthday, …) or reported: every tally key is a source collection (`system`,
 * `members`, `groups`, `switches`, `accounts`, and `config` / `webhook_url` when the file has them).
 *
 * Privacy: PluralKit's is per field, public or private. Only `visibility` is mapped, to one
 * synthetic bucket, Public; the per-field settings are kept verbatim in `extra.privacy` as a
 * record of what they were, and enforce nothing here.
 */
import {
  type BundleBucket,
  type BundleGroup,
  type BundleMember,
  type BundleSession,
  type BundleSystem,
  checkHeld,
  type ImportBundle,
  ImportFormatError,
  materialise,
  type ParsedBundle,
  type ParseTally,
  type SourceRef,
  streamedOf,
  WarningLog,
} from '../bundle.ts';
import type { Collections } from '../collections.ts';
import { cut, isObject } from './text.ts';

const NAME_MAX = 80;
const MEMBER_DESCRIPTION_MAX = 5000;
const GROUP_DESCRIPTION_MAX = 500;
/** PluralKit's own limit on the members of one switch (`Limits.MaxSwitchMemberCount`). */
const SWITCH_MEMBERS_MAX = 100;
/** Switches imported at most (PluralKit refuses a file with more); the newest are kept. */
const SWITCHES_KEPT_MAX = 100_000;
/** Beyond this many switches the file is refused as a whole. */
const SWITCHES_FILE_MAX = 1_000_000;

/** The one bucket PluralKit's privacy maps to: the members and groups whose visibility is public. */
const PUBLIC_BUCKET = 'public';
const PUBLIC: BundleBucket = {
  ref: { collection: 'synthetic', id: PUBLIC_BUCKET },
  name: 'Public',
  description: 'Imported from PluralKit: members and groups that were public there',
  icon: '🌐',
};

/** Version-1 files carry a member's privacy settings as keys of the member itself. */
const LEGACY_MEMBER_PRIVACY = [
  'visibility',
  'name_privacy',
  'description_privacy',
  'avatar_privacy',
  'birthday_privacy',
  'pronoun_privacy',
  'metadata_privacy',
];

/** NodaTime's ExtendedIso instant as PluralKit writes it: UTC, fraction of 1–9 digits omitted when zero. */
const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const COLOR = /^#?([0-9a-fA-F]{6})$/;

type Json = Record<string, unknown>;

class Report {
  readonly tally: Record<string, ParseTally> = {};
  readonly warnings = new WarningLog();

  constructor(collections: string[]) {
    for (const collection of collections) this.tally[collection] = { skipped: 0, failed: 0 };
  }

  warn(collection: string, sourceId: string | null, message: string): void {
    this.warnings.push({ collection, sourceId, message });
  }

  fail(collection: string, sourceId: string | null, message: string, count = 1): void {
    this.count(collection).failed += count;
    this.warn(collection, sourceId, message);
  }

  skip(collection: string, count: number): void {
    this.count(collection).skipped += count;
  }

  private count(collection: string): ParseTally {
    this.tally[collection] ??= { skipped: 0, failed: 0 };
    return this.tally[collection];
  }
}

export function parsePluralKit(text: string): ParsedBundle {
  const { root, accountLinks } = parseJson(text);
  const switches = root.switches;
  return materialise(mapRoot(root, accountLinks, present(switches) ? listOf(switches) : undefined));
}

/** A list of the file's documents: how many, and each in file order (parsed, or read one at a time). */
class DocList {
  constructor(
    readonly length: number,
    readonly items: Iterable<unknown>,
  ) {}
}

/** A list as the file holds it (an array parsed, or a DocList read one at a time); null when it is not a list. */
function listOf(value: unknown): DocList | null {
  if (value instanceof DocList) return value;
  return Array.isArray(value) ? new DocList(value.length, value) : null;
}

/** Drops every `accounts` key outside an array (see parseJson); `counted` learns how many each held. */
function dropAccounts(counted?: Map<unknown, number>) {
  return function (this: unknown, key: string, value: unknown) {
    if (key === 'accounts' && !Array.isArray(this)) {
      counted?.set(this, Array.isArray(value) ? value.length : value == null ? 0 : 1);
      return undefined;
    }
    return value;
  };
}

/** The reviver of a PluralKit file read a document at a time (parsePluralKitFile). */
export const PLURALKIT_REVIVER = dropAccounts();

/**
 * A PluralKit `system.json` read a document at a time (collections.ts, opened with
 * PLURALKIT_REVIVER): members and groups are read as lists, switches one at a time, and the
 * top-level `accounts` only counted, never parsed, so no rounded Discord id exists even briefly.
 */
export function parsePluralKitFile(file: Collections): ImportBundle {
  const root: Json = {};
  let switches: DocList | null | undefined;
  for (const key of file.keys()) {
    if (key === 'accounts') continue;
    const kind = file.kind(key);
    const list =
      kind === 'array'
        ? new DocList(
            file.count(key),
            mapIterable(file.documents(key)!, (d) => d.doc),
          )
        : null;
    if (key === 'switches') switches = list ?? (kind === 'other' && !present(file.value(key)) ? undefined : null);
    else root[key] = list ?? file.value(key);
  }
  const accounts = file.kind('accounts');
  const accountLinks =
    accounts === undefined
      ? 0
      : accounts === 'other'
        ? file.value('accounts') == null
          ? 0
          : 1
        : file.count('accounts');
  return mapRoot(root, accountLinks, switches);
}

function* mapIterable<T, U>(items: Iterable<T>, map: (item: T) => U): Generator<U> {
  for (const item of items) yield map(item);
}

/** The parsed top level mapped onto a bundle; its switches apart (undefined: none; null: not a list). */
function mapRoot(root: Json, accountLinks: number, switchList: DocList | null | undefined): ImportBundle {
  checkSource(root);
  const report = new Report(['system', 'members', 'groups', 'switches', 'accounts']);

  // accounts: Discord ids, dropped while parsing; only their number is reported.
  if (accountLinks > 0) {
    report.skip('accounts', accountLinks);
    report.warn('accounts', null, 'Discord account links are not imported');
  }
  // webhook_url: the dispatch target, never imported and never repeated in a warning.
  if (present(root.webhook_url)) {
    report.skip('webhook_url', 1);
    report.warn('webhook_url', null, 'the dispatch webhook is not imported: register a webhook on this server instead');
  }
  // config (and version 1's top-level timezone, which became config.timezone): not imported.
  if (present(root.config) || present(root.timezone)) report.skip('config', 1);

  const memberList = listOf(root.members)!;
  const groupList = present(root.groups) ? listOf(root.groups) : null;
  checkHeld([
    ['members', memberList.length, 'members'],
    ['groups', groupList?.length ?? 0, 'groups'],
  ]);
  const system = mapSystem(root, report);
  const { members, hids } = mapMembers(memberList, report);
  const groups = mapGroups(root.groups, members, hids, report);
  const sessions = mapSwitches(switchList, members, hids, report);

  return {
    source: 'pluralkit',
    system,
    buckets: [PUBLIC],
    fields: [],
    members,
    groups,
    // Switches are held (at most SWITCHES_FILE_MAX, a few numbers each) to be walked in time order.
    sessions: streamedOf(sessions),
    notes: streamedOf([]),
    chat: { categories: [], channels: [], messages: streamedOf([]) },
    // PluralKit's member_default_private / group_default_private have no bucket equivalent.
    defaults: { members: [], groups: [], fields: [] },
    tally: report.tally,
    warnings: report.warnings,
  };
}

/**
 * JSON.parse with a reviver that removes every `accounts` key (PluralKit writes it only at the top
 * level). Its Discord ids are JSON numbers above 2^53 that JSON.parse has already rounded, so the
 * reviver keeps only how many there were: no rounded id leaves this function.
 */
function parseJson(text: string): { root: Json; accountLinks: number } {
  const dropped = new Map<unknown, number>();
  let root: unknown;
  try {
    root = JSON.parse(text, dropAccounts(dropped));
  } catch (error) {
    // The reviver recurses: a file nested thousands of levels deep runs out of stack.
    if (error instanceof RangeError) throw new ImportFormatError('The file is nested too deeply to be read');
    throw new ImportFormatError(`not a PluralKit export: the file is not valid JSON (${(error as Error).message})`);
  }
  if (!isObject(root)) throw new ImportFormatError('not a PluralKit export: the file is not a JSON object');
  return { root, accountLinks: dropped.get(root) ?? 0 };
}

function checkSource(root: Json): void {
  if ('tuppers' in root) {
    throw new ImportFormatError('this is a Tupperbox export, not a PluralKit one: import it with a Tupperbox importer');
  }
  if (['frontHistory', 'frontStatuses', 'customFronts', 'privacyBuckets'].some((key) => key in root)) {
    throw new ImportFormatError('this is a Simply Plural export, not a PluralKit one: import it as Simply Plural');
  }
  if (root.version !== 1 && root.version !== 2) {
    throw new ImportFormatError('not a PluralKit export this importer knows: "version" must be 1 or 2');
  }
  if (!listOf(root.members)) throw new ImportFormatError('not a PluralKit export: "members" is not a list');
}

function mapSystem(root: Json, report: Report): BundleSystem {
  const wrongType: string[] = [];
  // Kept as given, not cut: the applier holds the system to its own limits.
  const system: BundleSystem = {
    name: text(root, 'name', wrongType),
    description: text(root, 'description', wrongType),
    tag: text(root, 'tag', wrongType),
    avatarUrl: text(root, 'avatar_url', wrongType),
    color: color(root, 'system', null, report),
  };
  const notKept = ['pronouns', 'banner'].filter((key) => present(root[key]));
  if (notKept.length > 0) report.warn('system', null, `system fields not kept: ${notKept.join(', ')}`);
  reportWrongType(report, 'system', null, wrongType);
  return system;
}

function mapMembers(list: DocList, report: Report): { members: BundleMember[]; hids: Map<string, number> } {
  const members: BundleMember[] = [];
  /** Normalised hid → index in `members`, for groups and switches. */
  const hids = new Map<string, number>();
  const uuids = new Set<string>();
  let index = -1;
  for (const raw of list.items) {
    index++;
    if (!isObject(raw)) {
      report.fail('members', null, `member ${index + 1} in the file is not an object: not imported`);
      continue;
    }
    const hid = typeof raw.id === 'string' ? normaliseHid(raw.id) : '';
    const uuid = typeof raw.uuid === 'string' && raw.uuid !== '' ? raw.uuid : null;
    // The member's source id: its uuid, else its hid.
    const id = uuid ?? (hid !== '' ? hid : null);
    if (id === null) {
      report.fail('members', null, `member ${index + 1} in the file has neither uuid nor id: not imported`);
      continue;
    }
    // A uuid or hid seen before: the first member keeps it, this one is not imported.
    if ((uuid !== null && uuids.has(uuid)) || (hid !== '' && hids.has(hid))) {
      report.fail('members', id, 'another member of the file has the same uuid or id: not imported');
      continue;
    }
    const member = mapMember(raw, id, hid, report);
    if (member === null) continue;
    if (uuid !== null) uuids.add(uuid);
    if (hid !== '') hids.set(hid, members.length);
    members.push(member);
  }
  return { members, hids };
}

function mapMember(raw: Json, id: string, hid: string, report: Report): BundleMember | null {
  const wrongType: string[] = [];
  const name = text(raw, 'name', wrongType);
  // No name: PluralKit requires one, and so does the model.
  if (name === null || name.trim() === '') {
    report.fail('members', id, 'member has no name: not imported');
    return null;
  }
  const privacy = memberPrivacy(raw);
  const extra: Record<string, unknown> = {};
  if (hid !== '') extra.hid = hid;
  setIfPresent(extra, 'color', color(raw, 'members', id, report));
  const avatarUrl = text(raw, 'avatar_url', wrongType);
  setIfPresent(extra, 'avatarUrl', avatarUrl);
  setIfPresent(extra, 'bannerUrl', text(raw, 'banner', wrongType));
  // Old exports copied avatar_url into webhook_avatar_url: kept only when it says something else.
  const webhookAvatarUrl = text(raw, 'webhook_avatar_url', wrongType);
  if (webhookAvatarUrl !== avatarUrl) setIfPresent(extra, 'webhookAvatarUrl', webhookAvatarUrl);
  setIfPresent(extra, 'birthday', birthday(raw, id, report));
  setIfPresent(extra, 'proxyTags', proxyTags(raw));
  for (const [from, to] of [
    ['keep_proxy', 'keepProxy'],
    ['tts', 'tts'],
    ['autoproxy_enabled', 'autoproxyEnabled'],
  ] as const) {
    if (typeof raw[from] === 'boolean') extra[to] = raw[from];
  }
  if (Number.isSafeInteger(raw.message_count)) extra.messageCount = raw.message_count;
  // created: PluralKit's timestamp string as given.
  setIfPresent(extra, 'created', text(raw, 'created', wrongType));
  // privacy: PluralKit's per-field settings, kept as data; only `visibility` decides the bucket.
  if (Object.keys(privacy).length > 0) extra.privacy = privacy;
  const displayName = text(raw, 'display_name', wrongType) ?? '';
  const pronouns = text(raw, 'pronouns', wrongType) ?? '';
  const description = text(raw, 'description', wrongType) ?? '';
  reportWrongType(report, 'members', id, wrongType);

  return {
    ref: { collection: 'members', id },
    name: limit(name, NAME_MAX, 'name', 'members', id, report),
    displayName: limit(displayName, NAME_MAX, 'display_name', 'members', id, report),
    pronouns: limit(pronouns, NAME_MAX, 'pronouns', 'members', id, report),
    description: limit(description, MEMBER_DESCRIPTION_MAX, 'description', 'members', id, report),
    aboutTags: [],
    archived: false,
    extra,
    buckets: isPublic(privacy.visibility, 'members', id, report) ? [PUBLIC_BUCKET] : [],
    fields: [],
  };
}

/**
 * The member's privacy settings as the file gives them: version 2's `privacy` object, or version
 * 1's keys on the member itself (a version-1 `privacy` string sets them all, as PluralKit reads it).
 */
function memberPrivacy(raw: Json): Json {
  if (isObject(raw.privacy)) return { ...raw.privacy };
  if (typeof raw.privacy === 'string') {
    return Object.fromEntries(LEGACY_MEMBER_PRIVACY.map((key) => [key, raw.privacy]));
  }
  return Object.fromEntries(LEGACY_MEMBER_PRIVACY.filter((key) => key in raw).map((key) => [key, raw[key]]));
}

/**
 * Proxy tags as `{prefix, suffix}` with nulls; version 1's `prefix` / `suffix` become one tag.
 * Tags with neither are dropped, as PluralKit does.
 */
function proxyTags(raw: Json): Array<{ prefix: string | null; suffix: string | null }> | null {
  let tags: unknown[];
  if (Array.isArray(raw.proxy_tags)) tags = raw.proxy_tags;
  else if ('prefix' in raw || 'suffix' in raw) tags = [{ prefix: raw.prefix, suffix: raw.suffix }];
  else return null;
  return tags
    .filter(isObject)
    .map((tag) => ({ prefix: nonEmpty(tag.prefix), suffix: nonEmpty(tag.suffix) }))
    .filter((tag) => tag.prefix !== null || tag.suffix !== null);
}

/** `YYYY-MM-DD`, or `--MM-DD` for PluralKit's "year hidden" years 0001 and 0004. */
function birthday(raw: Json, id: string, report: Report): string | null {
  if (!present(raw.birthday)) return null;
  const match = typeof raw.birthday === 'string' ? DATE.exec(raw.birthday) : null;
  if (match === null || !validDate(Number(match[1]), Number(match[2]), Number(match[3]))) {
    report.warn('members', id, 'birthday is not a YYYY-MM-DD date: not kept');
    return null;
  }
  const [, year, month, day] = match;
  return year === '0001' || year === '0004' ? `--${month}-${day}` : `${year}-${month}-${day}`;
}

function mapGroups(list: unknown, members: BundleMember[], hids: Map<string, number>, report: Report): BundleGroup[] {
  // Version 1 files (and version 2 ones from before 2021-09) have no groups.
  if (!present(list)) return [];
  const groupList = listOf(list);
  if (!groupList) {
    report.fail('groups', null, '"groups" is not a list: no group imported');
    return [];
  }
  const groups: BundleGroup[] = [];
  const seen = new Set<string>();
  let index = -1;
  for (const raw of groupList.items) {
    index++;
    if (!isObject(raw)) {
      report.fail('groups', null, `group ${index + 1} in the file is not an object: not imported`);
      continue;
    }
    const hid = typeof raw.id === 'string' ? normaliseHid(raw.id) : '';
    const uuid = typeof raw.uuid === 'string' && raw.uuid !== '' ? raw.uuid : null;
    // The group's source id: its uuid, else its hid.
    const id = uuid ?? (hid !== '' ? hid : null);
    if (id === null) {
      report.fail('groups', null, `group ${index + 1} in the file has neither uuid nor id: not imported`);
      continue;
    }
    if ((uuid !== null && seen.has(`u:${uuid}`)) || (hid !== '' && seen.has(`h:${hid}`))) {
      report.fail('groups', id, 'another group of the file has the same uuid or id: not imported');
      continue;
    }
    const wrongType: string[] = [];
    const name = text(raw, 'name', wrongType);
    if (name === null || name.trim() === '') {
      report.fail('groups', id, 'group has no name: not imported');
      continue;
    }
    if (uuid !== null) seen.add(`u:${uuid}`);
    if (hid !== '') seen.add(`h:${hid}`);

    // Group members are hids: matched normalised; those not among the members dropped, one warning.
    const inGroup = new Set<number>();
    const unknown: string[] = [];
    for (const entry of Array.isArray(raw.members) ? raw.members : []) {
      const member = typeof entry === 'string' ? hids.get(normaliseHid(entry)) : undefined;
      if (member === undefined) unknown.push(String(entry));
      else inGroup.add(member);
    }
    if (unknown.length > 0) {
      report.warn('groups', id, `dropped from the group, not among the members imported: ${listed(unknown)}`);
    }
    // display_name, icon and banner have no place on a group here: named, not kept.
    const notKept = ['display_name', 'icon', 'banner'].filter((key) => present(raw[key]));
    if (notKept.length > 0) report.warn('groups', id, `group fields not kept: ${notKept.join(', ')}`);
    const description = text(raw, 'description', wrongType) ?? '';
    reportWrongType(report, 'groups', id, wrongType);

    const privacy = isObject(raw.privacy) ? raw.privacy : {};
    groups.push({
      ref: { collection: 'groups', id },
      name: limit(name, NAME_MAX, 'name', 'groups', id, report),
      description: limit(description, GROUP_DESCRIPTION_MAX, 'description', 'groups', id, report),
      color: color(raw, 'groups', id, report),
      parent: null, // PluralKit groups do not nest
      members: [...inGroup].map((member) => members[member]?.ref as SourceRef),
      buckets: isPublic(privacy.visibility, 'groups', id, report) ? [PUBLIC_BUCKET] : [],
    });
  }
  return groups;
}

/** One switch of the file, once read: when, and who (indexes in the members list). */
interface Switch {
  at: number;
  members: number[];
}

/**
 * Switches (snapshots of who is at the front) → one session per member and stretch: it starts at
 * the first switch naming the member and ends at the first later switch that does not.
 */

function mapSwitches(
  list: DocList | null | undefined,
  members: BundleMember[],
  hids: Map<string, number>,
  report: Report,
): BundleSession[] {
  if (list === undefined) return [];
  if (list === null) {
    report.fail('switches', null, '"switches" is not a list: no front history imported');
    return [];
  }
  if (list.length > SWITCHES_FILE_MAX) {
    throw new ImportFormatError(`too many switches: ${list.length}, more than ${SWITCHES_FILE_MAX}`);
  }
  let switches: Switch[] = [];
  let index = -1;
  for (const raw of list.items) {
    index++;
    const at = isObject(raw) && typeof raw.timestamp === 'string' ? parseTimestamp(raw.timestamp) : null;
    // A switch without a readable time cannot be placed: failed.
    if (!isObject(raw) || at === null || !Array.isArray(raw.members)) {
      report.fail(
        'switches',
        null,
        `switch ${index + 1} in the file has no YYYY-MM-DDTHH:MM:SS[.fraction]Z timestamp or no members list: not imported`,
      );
      continue;
    }
    const sourceId = new Date(at).toISOString();
    // More than 100 members: PluralKit refuses the whole file; only this switch is failed here.
    if (raw.members.length > SWITCH_MEMBERS_MAX) {
      report.fail(
        'switches',
        sourceId,
        `switch has ${raw.members.length} members, more than ${SWITCH_MEMBERS_MAX}: not imported`,
      );
      continue;
    }
    // A hid not among the members is left out of this switch (PluralKit refuses the whole file).
    const fronting: number[] = [];
    const unknown: string[] = [];
    for (const entry of raw.members) {
      const member = typeof entry === 'string' ? hids.get(normaliseHid(entry)) : undefined;
      if (member === undefined) unknown.push(String(entry));
      else fronting.push(member);
    }
    if (unknown.length > 0) {
      report.warn('switches', sourceId, `left out of this switch, not among the members imported: ${listed(unknown)}`);
    }
    switches.push({ at, members: fronting });
  }

  // More than 100 000 switches: the newest are kept, the older ones failed.
  if (switches.length > SWITCHES_KEPT_MAX) {
    switches.sort((a, b) => b.at - a.at);
    const dropped = switches.length - SWITCHES_KEPT_MAX;
    switches = switches.slice(0, SWITCHES_KEPT_MAX);
    report.fail(
      'switches',
      null,
      `the file has more than ${SWITCHES_KEPT_MAX} switches: the ${dropped} oldest are not imported`,
      dropped,
    );
  }

  // Switches sharing a timestamp are one switch: the union of their members.
  const byTime = new Map<number, Set<number>>();
  for (const { at, members: fronting } of switches) {
    const set = byTime.get(at) ?? new Set<number>();
    for (const member of fronting) set.add(member);
    byTime.set(at, set);
  }
  const times = [...byTime.keys()].sort((a, b) => a - b); // oldest → newest

  // The walk: open stretches by member index; the newest switch's members stay open.
  const stretches: Array<{ member: number; startedAt: number; endedAt: number | null }> = [];
  const open = new Map<number, number>();
  for (const at of times) {
    const fronting = byTime.get(at) as Set<number>;
    for (const [member, startedAt] of open) {
      if (fronting.has(member)) continue;
      stretches.push({ member, startedAt, endedAt: at });
      open.delete(member); // deleting the entry being visited is safe in a Map iteration
    }
    for (const member of fronting) if (!open.has(member)) open.set(member, at);
  }
  for (const [member, startedAt] of open) stretches.push({ member, startedAt, endedAt: null });

  stretches.sort((a, b) => a.startedAt - b.startedAt || a.member - b.member);
  return stretches.map(({ member, startedAt, endedAt }) => {
    const ref = members[member]?.ref as SourceRef;
    // Switches have no ids: a session is known by its member and its start, stable across exports.
    const id = `${ref.id}@${new Date(startedAt).toISOString()}`;
    return { ref: { collection: 'switches', id }, member: ref, startedAt, endedAt, note: null };
  });
}

/** Epoch ms of a PluralKit timestamp, its fraction truncated to ms; null when it is not one or names no real instant. */
function parseTimestamp(value: string): number | null {
  const match = TIMESTAMP.exec(value);
  if (match === null) return null;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  if (!validDate(year, month, day) || hour > 23 || minute > 59 || second > 59) return null;
  // The fraction truncated to ms by hand: Date.parse is only specified for 3 digits.
  const ms = Number((match[7] ?? '').slice(0, 3).padEnd(3, '0'));
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day); // not Date.UTC, which reads years below 100 as 19xx
  date.setUTCHours(hour, minute, second, ms);
  return date.getTime();
}

function validDate(year: number, month: number, day: number): boolean {
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1];
  return days !== undefined && day >= 1 && day <= days;
}

/** PluralKit privacy: null (or absent) is public, "" and "private" private; anything else private, with a warning. */
function isPublic(visibility: unknown, collection: string, id: string, report: Report): boolean {
  if (visibility == null || visibility === 'public') return true;
  if (visibility !== '' && visibility !== 'private') {
    report.warn(
      collection,
      id,
      `visibility ${JSON.stringify(cut(String(visibility), 20))} is neither public nor private: treated as private`,
    );
  }
  return false;
}

/** A PluralKit colour (6 hex digits) as `#rrggbb` lower-case; null when unset or not a colour (with a warning). */
function color(raw: Json, collection: string, id: string | null, report: Report): string | null {
  if (!present(raw.color)) return null;
  const match = typeof raw.color === 'string' ? COLOR.exec(raw.color) : null;
  if (match === null) {
    report.warn(collection, id, 'color is not 6 hex digits: not kept');
    return null;
  }
  return `#${match[1]?.toLowerCase()}`;
}

/** The text cut to `max` code points (as the contract counts them), with a warning when cut. */
function limit(value: string, max: number, key: string, collection: string, id: string, report: Report): string {
  const kept = cut(value, max);
  if (kept.length < value.length) report.warn(collection, id, `${key} cut to ${max} characters`);
  return kept;
}

/** A string value of the object, null when absent, null or ''; any other type is noted in `wrongType`. */
function text(raw: Json, key: string, wrongType: string[]): string | null {
  const value = raw[key];
  if (typeof value === 'string') return value === '' ? null : value;
  if (value != null) wrongType.push(key);
  return null;
}

function reportWrongType(report: Report, collection: string, id: string | null, wrongType: string[]): void {
  if (wrongType.length > 0)
    report.warn(collection, id, `fields that are not text were ignored: ${wrongType.join(', ')}`);
}

/** As the bot may show them: upper-case, or split as `abc-def`. */
function normaliseHid(hid: string): string {
  return hid.trim().toLowerCase().replaceAll('-', '');
}

/** Up to 10 entries, each cut short, for a warning. */
function listed(entries: string[]): string {
  const shown = entries.slice(0, 10).map((entry) => cut(entry, 20));
  return entries.length > 10 ? `${shown.join(', ')} and ${entries.length - 10} more` : shown.join(', ');
}

function setIfPresent(target: Record<string, unknown>, key: string, value: unknown): void {
  if (value != null) target[key] = value;
}

function nonEmpty(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}

function present(value: unknown): boolean {
  return value != null && value !== '';
}
