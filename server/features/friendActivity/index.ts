/** The friend activity area's entry point for other areas: the front as a friend sees it (the event stream's friend events). */
export { getFront as friendFront } from './service.ts';
