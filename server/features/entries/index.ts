/** The entries area's public entry point: the owner's note writes that friend routes reuse once the access engine has authorised them, and the notes an import writes. */
export {
  CREATE_VERDICT_COLUMNS,
  type CreateVerdict,
  createEntry,
  createEntrySql,
  EXAMPLE_NOTE_CREATE,
  type NoteCreate,
  noteToCreate,
  deleteEntry,
  type ImportedNote,
  insertImportedNotes,
  setImportedNoteTime,
  updateEntry,
} from './service.ts';
