// What the caller may choose for a session: profiles, the models they are
// granted (`GET /v1/models` lists only those) and projects. Fetched once per
// page and shared by the new-chat options and the session header.

import { api } from './api.js';

let loading = null;

/** {profiles, defaultProfile, models, defaultModel, projects}. */
export function catalog() {
  if (!loading) {
    loading = Promise.all([
      api('GET', '/v1/profiles'),
      api('GET', '/v1/models'),
      api('GET', '/v1/projects').catch(() => ({ projects: [] })),
    ]).then(([profiles, models, projects]) => ({
      profiles: profiles.profiles,
      defaultProfile: profiles.default,
      models: models.models,
      defaultModel: models.default,
      projects: projects.projects,
    }));
    // A failure is not kept: the next ask tries again.
    loading.catch(() => {
      loading = null;
    });
  }
  return loading;
}

/** A model's label in a list: its id, and the model behind it when they differ. */
export function modelLabel(m) {
  return m.id === m.model ? m.id : `${m.id} (${m.model})`;
}
