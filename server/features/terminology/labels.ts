/**
 * Pure label rules: the product defaults, normalisation of a sent label, and the layer
 * arithmetic (overlay a sparse layer on full labels; diff full labels against inherited ones).
 */
import type { components } from '../../../generated/api.d.ts';
import { badRequest } from '../../core/errors.ts';
import type { StoredLabels } from './repo.ts';

type Schemas = components['schemas'];
export type Terms = Schemas['TerminologyTerms'];
export type Actions = Schemas['TerminologyActions'];
export type Icons = Schemas['TerminologyIcons'];
export type TerminologyPatch = Schemas['TerminologyPatch'];

export type NounKey = keyof Terms;
export type ActionKey = keyof Actions;
export type IconKey = keyof Icons;

export interface Labels {
  terms: Terms;
  actions: Actions;
  icons: Icons;
}

export const NOUN_KEYS = [
  'member',
  'group',
  'folder',
  'system',
  'front',
  'friend',
  'note',
  'privacyBucket',
  'customField',
  'sideSystem',
  'subSystem',
] as const satisfies readonly NounKey[];
export const ACTION_KEYS = [
  'archiveMember',
  'archivedMembers',
  'trash',
  'deleteMember',
  'permanentlyDeleteMember',
  'unarchiveMember',
  'restoreFromTrash',
  'mostFronted',
] as const satisfies readonly ActionKey[];
export const ICON_KEYS = ['trash'] as const satisfies readonly IconKey[];
const FORMS = ['singular', 'plural'] as const;

export const MAX_LABEL_LENGTH = 40;

/** Trims and upper-cases the first letter of each word; the rest of a word is kept (acronyms survive). */
function titleCase(label: string): string {
  return label
    .trim()
    .replace(/(^|\s)(\p{Ll})/gu, (_m, before: string, letter: string) => before + letter.toUpperCase());
}

/** A sent label → its stored form, or null for "fall back" (empty or blank). */
export function normaliseLabel(raw: string, field: string): string | null {
  const label = titleCase(raw);
  if (label === '') return null;
  const length = [...label].length; // code points, as JSON Schema's maxLength counts them
  if (length > MAX_LABEL_LENGTH) {
    throw badRequest(`${field} must be at most ${MAX_LABEL_LENGTH} characters after trimming (got ${length})`);
  }
  return label;
}

// Defaults go through the same normalisation as sent labels, so responses look alike.
const noun = (singular: string, plural: string) => ({ singular: titleCase(singular), plural: titleCase(plural) });

/** Product defaults: what a never-saved account sees and what reset writes. */
export const DEFAULT_LABELS: Labels = Object.freeze({
  terms: {
    member: noun('member', 'members'),
    group: noun('group', 'groups'),
    folder: noun('group', 'groups'), // the published spec labels folders "group" by default
    system: noun('system', 'systems'),
    front: noun('front', 'fronts'),
    friend: noun('friend', 'friends'),
    note: noun('note', 'notes'),
    privacyBucket: noun('privacy bucket', 'privacy buckets'),
    customField: noun('custom field', 'custom fields'),
    sideSystem: noun('side system', 'side systems'),
    subSystem: noun('sub system', 'sub systems'),
  },
  actions: {
    archiveMember: titleCase('archive member'),
    archivedMembers: titleCase('archived members'),
    trash: titleCase('trash'),
    deleteMember: titleCase('delete member'),
    permanentlyDeleteMember: titleCase('permanently delete member'),
    unarchiveMember: titleCase('unarchive member'),
    restoreFromTrash: titleCase('restore from trash'),
    mostFronted: titleCase('most fronted'),
  },
  icons: { trash: 'fa-tombstone-blank' },
});

/** Normalised changes of a patch; null means "fall back" (default or inherited label). */
export interface LabelChanges {
  terms: Partial<Record<NounKey, { singular?: string | null; plural?: string | null }>>;
  actions: Partial<Record<ActionKey, string | null>>;
  icons: Partial<Icons>;
}

/** Validates and normalises a patch body; `prefix` names where it sits in the request ('' or 'terms.'). */
export function readPatch(patch: TerminologyPatch, prefix: string): LabelChanges {
  const changes: LabelChanges = { terms: {}, actions: {}, icons: {} };
  for (const key of NOUN_KEYS) {
    const sent = patch[key];
    if (!sent) continue;
    const out: { singular?: string | null; plural?: string | null } = {};
    for (const form of FORMS) {
      const raw = sent[form];
      if (raw !== undefined) out[form] = normaliseLabel(raw, `${prefix}${key}.${form}`);
    }
    changes.terms[key] = out;
  }
  for (const key of ACTION_KEYS) {
    const raw = patch.actions?.[key];
    if (raw !== undefined) changes.actions[key] = normaliseLabel(raw, `${prefix}actions.${key}`);
  }
  for (const key of ICON_KEYS) {
    const icon = patch.icons?.[key];
    if (icon !== undefined) changes.icons[key] = icon; // the contract's pattern has already checked it
  }
  return changes;
}

/** Applies normalised changes to `current`; a null change takes the label from `fallback`. */
export function applyChanges(current: Labels, changes: LabelChanges, fallback: Labels): Labels {
  const next = copy(current);
  for (const key of NOUN_KEYS) {
    const change = changes.terms[key];
    if (!change) continue;
    for (const form of FORMS) {
      const value = change[form];
      if (value !== undefined) next.terms[key][form] = value ?? fallback.terms[key][form];
    }
  }
  for (const key of ACTION_KEYS) {
    const value = changes.actions[key];
    if (value !== undefined) next.actions[key] = value ?? fallback.actions[key];
  }
  for (const key of ICON_KEYS) {
    const value = changes.icons[key];
    if (value !== undefined) next.icons[key] = value;
  }
  return next;
}

/**
 * The labels `changes` set, a fallback (null) taken from `fallback`, as a sparse layer: what
 * applyChanges writes over the current labels, for a statement that reads those itself.
 */
export function changedLabels(changes: LabelChanges, fallback: Labels): StoredLabels {
  const layer: StoredLabels = { terms: {}, actions: {}, icons: {} };
  for (const key of NOUN_KEYS) {
    const change = changes.terms[key];
    if (!change) continue;
    const noun: Partial<Record<(typeof FORMS)[number], string>> = {};
    for (const form of FORMS) {
      const value = change[form];
      if (value !== undefined) noun[form] = value ?? fallback.terms[key][form];
    }
    layer.terms[key] = noun;
  }
  for (const key of ACTION_KEYS) {
    const value = changes.actions[key];
    if (value !== undefined) layer.actions[key] = value ?? fallback.actions[key];
  }
  for (const key of ICON_KEYS) {
    const value = changes.icons[key];
    if (value !== undefined) layer.icons[key] = value;
  }
  return layer;
}

function copy(labels: Labels): Labels {
  const terms = Object.fromEntries(NOUN_KEYS.map((k) => [k, { ...labels.terms[k] }])) as unknown as Terms;
  return { terms, actions: { ...labels.actions }, icons: { ...labels.icons } };
}

const isLabel = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

/** `base` with every known, non-empty label of a stored layer on top (unknown or stale keys are ignored). */
export function overlay(base: Labels, layer: StoredLabels | undefined): Labels {
  const next = copy(base);
  if (!layer) return next;
  for (const key of NOUN_KEYS) {
    for (const form of FORMS) {
      const value = layer.terms?.[key]?.[form];
      if (isLabel(value)) next.terms[key][form] = value;
    }
  }
  for (const key of ACTION_KEYS) {
    const value = layer.actions?.[key];
    if (isLabel(value)) next.actions[key] = value;
  }
  for (const key of ICON_KEYS) {
    const value = layer.icons?.[key];
    if (isLabel(value)) next.icons[key] = value;
  }
  return next;
}

/** The sparse layer that turns `inherited` into `target`: only the labels that differ. */
export function diff(inherited: Labels, target: Labels): StoredLabels {
  const layer: StoredLabels = { terms: {}, actions: {}, icons: {} };
  for (const key of NOUN_KEYS) {
    for (const form of FORMS) {
      if (target.terms[key][form] !== inherited.terms[key][form]) {
        layer.terms[key] ??= {};
        layer.terms[key][form] = target.terms[key][form];
      }
    }
  }
  for (const key of ACTION_KEYS)
    if (target.actions[key] !== inherited.actions[key]) layer.actions[key] = target.actions[key];
  for (const key of ICON_KEYS) if (target.icons[key] !== inherited.icons[key]) layer.icons[key] = target.icons[key];
  return layer;
}

export function isEmptyLayer(layer: StoredLabels): boolean {
  return (
    Object.keys(layer.terms).length === 0 &&
    Object.keys(layer.actions).length === 0 &&
    Object.keys(layer.icons).length === 0
  );
}
