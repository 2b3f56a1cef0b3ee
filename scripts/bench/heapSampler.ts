/**
 * Preloaded into a server by `npm run bench:profile -- --heap` (`--import`): V8's sampling heap
 * profiler over the measured load only, collected objects included, so the profile says what was
 * allocated (not what stayed alive). With HEAP_PROFILE_SURVIVORS=1 (`--heap --survivors`) the
 * objects the young generation's collections freed are left out: what remains outlived at least
 * one scavenge, which is what gets promoted to the old generation. SIGUSR2 starts sampling; the
 * next SIGUSR2 writes the profile to HEAP_PROFILE_FILE.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

const file = process.env.HEAP_PROFILE_FILE;
if (!file) throw new Error('heapSampler.ts needs HEAP_PROFILE_FILE');
const survivors = process.env.HEAP_PROFILE_SURVIVORS === '1';
const session = new Session();
session.connect();
let sampling = false;
process.on('SIGUSR2', () => {
  void (async () => {
    if (!sampling) {
      sampling = true;
      await session.post('HeapProfiler.startSampling', {
        samplingInterval: 1024,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: !survivors,
      });
      return;
    }
    const { profile } = await session.post('HeapProfiler.stopSampling');
    writeFileSync(file, JSON.stringify(profile));
  })();
});
