import { readBytes } from './bytes';

/** A file the API accepts: its name and its bytes. */
export interface FileLike {
  name: string;
  bytes: Uint8Array;
}

/** Turns a path or bytes into a FileLike. */
export async function toFile(source: string | Uint8Array, name?: string): Promise<FileLike> {
  const bytes = await readBytes(source);
  return { name: name ?? (typeof source === 'string' ? source : 'upload.bin'), bytes };
}

export class Uploads {
  constructor(private readonly endpoint: string) {}

  /** Uploads one file: POST <endpoint>/uploads. */
  async create(source: string | Uint8Array): Promise<Response> {
    const file = await toFile(source);
    return fetch(`${this.endpoint}/uploads`, { method: 'POST', body: file.bytes });
  }
}
