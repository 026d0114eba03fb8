import { Uploads, toFile } from './uploads';

export { Uploads, toFile };

/** The client's entry point: uploads through the given endpoint. */
export function createUpload(endpoint: string, path: string): Promise<Response> {
  return new Uploads(endpoint).create(path);
}
