'use strict';

const path = require('path');
const { readFileSync } = require('fs');

const defaults = {
  name: 'app',
  port: 8080,
  retries: 3,
  timeout: 30 * 1000,
  paths: { root: process.cwd(), cache: path.join(process.cwd(), '.cache') },
};

function load(file, overrides) {
  // Read the file and merge it over the defaults.
  const text = readFileSync(file, 'utf8');
  const parsed = JSON.parse(text);
  return Object.assign({}, defaults, parsed, overrides);
}

function validate(config) {
  if (config.port < 0) {
    // Ports are unsigned.
    throw new Error('port must be positive: ' + config.port);
  }
  if (!config.name) {
    throw new Error('name is required');
  }
  return { ok: true, config: config };
}

module.exports = {
  load: load,
  validate,
  defaults: defaults,
};
