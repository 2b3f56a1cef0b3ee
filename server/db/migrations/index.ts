/** Every migration, in order. Add new ones at the end; never edit one that has shipped. */
import * as m0001 from './0001_foundation.ts';
import * as m0002 from './0002_core_model.ts';
import * as m0004 from './0004_entries_front_trash.ts';

// 0003 (terminology) is added with its feature.
export const migrations = [m0001, m0002, m0004];
