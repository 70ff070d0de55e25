// Images attached to a message: pasted or dropped into the composer, shown
// as thumbnails before sending, sent as base64 image blocks (the shapes of
// POST /v1/sessions/{id}/messages), and shown again in the transcript. The
// pure parts (sniffing, the request's content, data URLs) are exported for
// the node tests.

import { h } from './dom.js';

/** The server's (and Anthropic's) cap on one image, in bytes. */
export const MAX_IMAGE_BYTES = 5 * 1024 * 1024;

const MAGIC = [
  [[0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'image/png'],
  [[0xff, 0xd8, 0xff], 'image/jpeg'],
  [[0x47, 0x49, 0x46, 0x38], 'image/gif'],
  [[0x52, 0x49, 0x46, 0x46], 'image/webp'],
];

/** The image format of `bytes` (a Uint8Array) by its magic bytes, or null. */
export function sniffImage(bytes) {
  for (const [magic, type] of MAGIC) {
    if (!magic.every((b, i) => bytes[i] === b)) continue;
    if (type === 'image/webp' && String.fromCharCode(...bytes.slice(8, 12)) !== 'WEBP') continue;
    return type;
  }
  return null;
}

/** Standard base64 of a Uint8Array, in chunks (no call-stack limit). */
export function toBase64(bytes) {
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

/**
 * An attachment from a file's bytes, or an error message saying why not.
 * @returns {{image?: {media_type: string, data: string}, error?: string}}
 */
export function attachment(name, bytes) {
  const mediaType = sniffImage(bytes);
  if (!mediaType) return { error: `${name} is not a PNG, JPEG, GIF or WebP image` };
  if (bytes.length > MAX_IMAGE_BYTES) return { error: `${name} is over 5 MiB` };
  return { image: { media_type: mediaType, data: toBase64(bytes) } };
}

/**
 * An attachment from a pasted or dropped file (a Blob): the size and the
 * magic bytes are checked before the whole file is read, so a huge drop is
 * refused without loading it.
 * @returns {Promise<{image?: {media_type: string, data: string}, error?: string}>}
 */
export async function fileAttachment(file) {
  const name = file.name || 'the file';
  const head = new Uint8Array(await file.slice(0, 12).arrayBuffer());
  if (!sniffImage(head)) return { error: `${name} is not a PNG, JPEG, GIF or WebP image` };
  if (file.size > MAX_IMAGE_BYTES) return { error: `${name} is over 5 MiB` };
  return attachment(name, new Uint8Array(await file.arrayBuffer()));
}

/** The request's `content`: the text alone, or text and image blocks. */
export function messageContent(text, images) {
  if (!images.length) return text;
  const blocks = text.trim() ? [{ type: 'text', text }] : [];
  for (const image of images) blocks.push({ type: 'image', source: { type: 'base64', ...image } });
  return blocks;
}

/** A data URL for an image block's base64 source; null for anything else. */
export function dataUrl(source) {
  if (!source || source.type !== 'base64' || !/^image\/(png|jpeg|gif|webp)$/.test(source.media_type)) return null;
  if (typeof source.data !== 'string' || !/^[A-Za-z0-9+/=]*$/.test(source.data)) return null;
  return `data:${source.media_type};base64,${source.data}`;
}

/** Thumbnails of a transcript message's image blocks. */
export function imageThumbnails(content) {
  const urls = (content || []).filter((b) => b.type === 'image').map((b) => dataUrl(b.source)).filter(Boolean);
  if (!urls.length) return null;
  return h('div', { class: 'thumbs' }, urls.map((src) => h('img', { class: 'thumb', src, alt: 'Attached image', testid: 'message-image' })));
}

/** The composer's attachments: paste and drop add, a thumbnail's × removes. */
export class Attachments {
  constructor(target, notify) {
    this.images = [];
    this.notify = notify;
    this.el = h('div', { class: 'thumbs composer-thumbs', testid: 'attachments', hidden: true });
    target.addEventListener('paste', (event) => {
      const files = [...(event.clipboardData?.files || [])];
      if (!files.length) return;
      event.preventDefault();
      this.addFiles(files);
    });
    target.addEventListener('dragover', (event) => {
      if ([...(event.dataTransfer?.types || [])].includes('Files')) event.preventDefault();
    });
    target.addEventListener('drop', (event) => {
      const files = [...(event.dataTransfer?.files || [])];
      if (!files.length) return;
      event.preventDefault();
      this.addFiles(files);
    });
  }

  async addFiles(files) {
    for (const file of files) {
      const made = await fileAttachment(file);
      if (made.error) this.notify(made.error);
      else this.images.push(made.image);
    }
    this.render();
  }

  /** Emptied once the message went. */
  clear() {
    this.images = [];
    this.render();
  }

  render() {
    this.el.hidden = !this.images.length;
    this.el.replaceChildren(
      ...this.images.map((image, index) =>
        h(
          'span',
          { class: 'thumb-wrap' },
          h('img', { class: 'thumb', src: dataUrl({ type: 'base64', ...image }), alt: `Attachment ${index + 1}`, testid: 'attachment' }),
          h('button', { type: 'button', class: 'thumb-remove', 'aria-label': `Remove attachment ${index + 1}`, onclick: () => this.remove(index) }, '×'),
        ),
      ),
    );
  }

  remove(index) {
    this.images.splice(index, 1);
    this.render();
  }
}
