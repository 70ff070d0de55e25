// One animation frame batches the expensive work (re-rendering markdown,
// scrolling): a burst of events costs one render, not one per event.

const tasks = new Set();
const after = new Set();
let pending = false;

function run() {
  pending = false;
  const now = [...tasks];
  tasks.clear();
  for (const task of now) task();
  const then = [...after];
  after.clear();
  for (const task of then) task();
}

function request() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(run);
}

/** Run `task` once in the next frame (the same function twice runs once). */
export function nextFrame(task) {
  tasks.add(task);
  request();
}

/** Run `task` in the next frame, after the nextFrame tasks. */
export function afterFrame(task) {
  after.add(task);
  request();
}
