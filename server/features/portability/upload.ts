/**
 * An import's upload, received into a temporary file as it arrives and checked on the way (one
 * JSON object for Simply Plural and PluralKit, a tar header for the native archive), so the server
 * never holds the file: it goes on to object storage from the file (storage.upload) and the file
 * is removed. A body that stops being JSON is refused with a 400 as soon as that byte arrives.
 */
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { components } from '../../../generated/api.d.ts';
import { ownerOf, type ServiceContext } from '../../core/context.ts';
import { badRequest } from '../../core/errors.ts';
import { BodyRefused, type BodySink, type ReceiveBody } from '../../core/bodySink.ts';
import type { ImportSource } from './bundle.ts';
import { JsonObjectSyntax } from './jsonSyntax.ts';
import { createImport, type ReceivedFile, requireImportStorage } from './service.ts';
import { tarHeaderError } from './tar.ts';

type Schemas = components['schemas'];

/** What each source's file must be, checked chunk by chunk; `end` has the last word. */
interface FileCheck {
  feed(chunk: Buffer): void;
  end(): string | null;
}

function jsonCheck(): FileCheck {
  const syntax = new JsonObjectSyntax();
  const refuse = (problem: string) => `The file is not a JSON object (${problem}): send the export file unchanged`;
  return {
    feed: (chunk) => {
      const problem = syntax.feed(chunk).problem;
      if (problem) throw new BodyRefused(refuse(problem));
    },
    end: () => {
      const problem = syntax.end();
      return problem && refuse(problem);
    },
  };
}

/** The native archive: its first 512 bytes are a tar header (the rest is read by the job). */
function tarCheck(): FileCheck {
  const head: Buffer[] = [];
  let kept = 0;
  return {
    feed: (chunk) => {
      if (kept >= 512) return;
      head.push(chunk.subarray(0, 512 - kept));
      kept += Math.min(chunk.length, 512 - kept);
    },
    end: () => {
      const header = tarHeaderError(Buffer.concat(head));
      return header && `The file is not a tar archive (${header}): send the export archive unchanged`;
    },
  };
}

/** The import file of the request, received by `receive` into a temporary file. */
async function receiveImportFile(receive: ReceiveBody, source: ImportSource, userId: string): Promise<ReceivedFile> {
  // In the system's temporary directory (TMPDIR), named after the account, removed when stored.
  const dir = await mkdtemp(join(tmpdir(), `import-${userId}-`));
  const path = join(dir, 'upload');
  const dispose = () => rm(dir, { recursive: true, force: true });
  const file = createWriteStream(path);
  const check = source === 'native' ? tarCheck() : jsonCheck();
  let failure: Error | null = null;
  file.on('error', (err) => {
    failure = err;
  });
  const sink: BodySink<ReceivedFile> = {
    write: (chunk) => {
      check.feed(chunk);
      return file.write(chunk);
    },
    onDrain: (resume) => void file.once('drain', resume),
    finish: async (size) => {
      await new Promise<void>((resolve, reject) => {
        if (failure) return reject(failure);
        file.end((err?: Error | null) => (err ? reject(err) : resolve()));
      });
      if (size === 0) throw badRequest('The request body is empty: send the export file');
      const problem = check.end();
      if (problem) throw badRequest(problem);
      return { path, size, dispose };
    },
    abort: () => {
      file.destroy();
      void dispose();
    },
  };
  try {
    return await receive(sink);
  } catch (err) {
    await dispose();
    throw err;
  }
}

/**
 * An import sent in the request: received into a temporary file (none is read without object
 * storage to put it in), stored and queued, and the temporary file removed whatever happened.
 */
export async function acceptImport(
  ctx: ServiceContext,
  input: { source: ImportSource; dryRun: boolean },
  receive: ReceiveBody,
): Promise<Schemas['ImportAccepted']> {
  requireImportStorage(ctx);
  const file = await receiveImportFile(receive, input.source, ownerOf(ctx));
  try {
    return await createImport(ctx, { source: input.source, dryRun: input.dryRun, file });
  } finally {
    await file.dispose();
  }
}
