// Waiting and checking, with failures that say what was expected.

export const WAIT = 20_000;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export class Failure extends Error {}

export function check(condition, message) {
  if (!condition) throw new Failure(message);
}

/** Poll `fn` until it returns something truthy. */
export async function until(what, fn, timeout = WAIT) {
  const started = Date.now();
  let last;
  while (Date.now() - started < timeout) {
    try {
      const value = await fn();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    await sleep(100);
  }
  throw new Failure(`timed out after ${timeout} ms waiting for ${what}${last ? ` (${last.message.split('\n')[0]})` : ''}`);
}

export async function visible(locator, what, timeout = WAIT) {
  try {
    await locator.first().waitFor({ state: 'visible', timeout });
  } catch {
    throw new Failure(`${what} did not show within ${timeout} ms`);
  }
  return locator;
}
