/** Every migration, in order. Add new ones at the end; never edit one that has shipped. */
import * as m0001 from './0001_foundation.ts';

export const migrations = [m0001];
