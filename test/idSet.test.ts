/** The compact id sets of imports (server/features/portability/idSet.ts). */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { StringIdSet, UuidSet } from '../server/features/portability/idSet.ts';

describe('compact id sets', () => {
  it('StringIdSet holds what was added, across its growth, and nothing else', () => {
    const set = new StringIdSet();
    for (let i = 0; i < 50_000; i++) set.add(`65a1f2a0e4b0${i.toString(16).padStart(12, '0')}`);
    set.add('');
    set.add('😀 an id');
    expect(set.size).toBe(50_002);
    for (let i = 0; i < 50_000; i += 997) expect(set.has(`65a1f2a0e4b0${i.toString(16).padStart(12, '0')}`)).toBe(true);
    expect([set.has(''), set.has('😀 an id')]).toEqual([true, true]);
    for (const absent of ['65a1f2a0e4b0ffffffffffff', '😀 an Id', ' ', '65A1F2A0E4B0000000000000'])
      expect(set.has(absent), absent).toBe(false);
    set.add('😀 an id');
    expect(set.size).toBe(50_002);
  });

  it('UuidSet holds uuids whatever their case', () => {
    const set = new UuidSet();
    const ids = Array.from({ length: 5000 }, () => randomUUID());
    for (const id of ids) set.add(id);
    expect(ids.every((id) => set.has(id.toUpperCase()))).toBe(true);
    expect(set.has(randomUUID())).toBe(false);
    expect(set.size).toBe(5000);
  });
});
