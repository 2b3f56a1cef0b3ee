/** The privacy-buckets area's public entry point: presets and the defaults given to new content. */
export { applyDefaults, defaultsSql, ensurePresets, type DefaultKind } from './presets.ts';
export { createBucket, setBucketsOf, setDefaults, updateBucket } from './service.ts';
