/** The messaging area's public entry point: its handlers live in handlers.ts; the runtime wires the re-encryption and link-preview jobs. */
export { defineMessageReencryption, queueMessageReencryption } from './reencrypt.ts';
export { defineLinkPreviews } from './linkPreviews.ts';
export {
  createCategory,
  createChannel,
  createSpace,
  moveChannel,
  updateCategory,
  updateChannel,
} from './structure.ts';
