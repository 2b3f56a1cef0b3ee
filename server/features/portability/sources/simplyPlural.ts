import { type ImportBundle, ImportFormatError } from '../bundle.ts';
export function parseSimplyPlural(_doc: unknown): ImportBundle {
  throw new ImportFormatError('stub');
}
