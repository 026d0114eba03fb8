import { promises as fs } from 'node:fs';

/** Reads a file's bytes, or passes bytes through. */
export async function readBytes(source: string | Uint8Array): Promise<Uint8Array> {
  if (typeof source !== 'string') {
    return source;
  }
  return new Uint8Array(await fs.readFile(source));
}
