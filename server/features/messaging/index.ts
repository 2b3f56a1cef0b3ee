/** The messaging area's public entry point: its handlers live in handlers.ts; the runtime wires the re-encryption job. */
export { defineMessageReencryption, queueMessageReencryption } from './reencrypt.ts';
