// Browser plumbing for the UI's e2e test and bench: playwright-core (from
// NODE_PATH or .tools/) driving Debian's chromium, headless, fresh profile.

import { createRequire } from 'node:module';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO } from './harness.mjs';

const require = createRequire(import.meta.url);

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

function playwright() {
  // ES modules ignore NODE_PATH; require() honours it.
  try {
    return require('playwright-core');
  } catch {
    return require(join(REPO, '.tools/node_modules/playwright-core'));
  }
}

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** {context, page, close()} with a fresh user-data-dir. */
export async function launch() {
  const { chromium } = playwright();
  const profile = mkdtempSync(join(tmpdir(), 'agentd-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: DESKTOP,
  });
  const page = context.pages()[0] || (await context.newPage());
  const close = async () => {
    await context.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  };
  return { context, page, close };
}
