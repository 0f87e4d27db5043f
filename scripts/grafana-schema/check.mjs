// Checks dashboards against Grafana's own schema, as Grafana publishes it: the TypeScript types of
// @grafana/schema (pinned to the Grafana version the compose stack runs), turned into JSON Schemas
// by ts-json-schema-generator and applied with ajv. A field Grafana does not know, or a value of
// the wrong type, fails. `required` is relaxed, since Grafana fills every default in.
//
// Checked: the dashboard against `Dashboard` (the export's `__inputs`, `__elements` and
// `__requires`, which Grafana's import reads, are allowed on top), and each panel's `options`
// and `fieldConfig.defaults.custom` against its plugin's `Options` and `FieldConfig`, for the
// plugins whose types @grafana/schema publishes; the others are named as not checked.
//
// Usage: node check.mjs DASHBOARD.json...   (also `--self-test`: broken copies must fail)

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Ajv from 'ajv';
import { createGenerator } from 'ts-json-schema-generator';

const here = path.dirname(fileURLToPath(import.meta.url));
const raw = path.join(here, 'node_modules/@grafana/schema/dist/esm/raw');
const EXPORT_KEYS = ['__inputs', '__elements', '__requires'];

// A JSON Schema for one exported type of a declaration file, with `required` relaxed.
function schemaOf(file, type) {
  const schema = createGenerator({ path: file, type, skipTypeCheck: true }).createSchema(type);
  const relax = (node) => {
    if (Array.isArray(node)) return node.forEach(relax);
    if (node && typeof node === 'object') {
      delete node.required;
      Object.values(node).forEach(relax);
    }
  };
  relax(schema);
  return schema;
}

const ajv = new Ajv({ allErrors: true, strict: false });
const dashboardSchema = schemaOf(path.join(raw, 'dashboard/x/dashboard_types.gen.d.ts'), 'Dashboard');
for (const key of EXPORT_KEYS) {
  dashboardSchema.definitions.Dashboard.properties[key] = {};
}
const validateDashboard = ajv.compile(dashboardSchema);

// The plugin's declaration file, e.g. composable/timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen.d.ts.
function pluginFile(type) {
  const folder = path.join(raw, 'composable', type, 'panelcfg/x');
  if (!fs.existsSync(folder)) return null;
  const file = fs.readdirSync(folder).find((name) => name.endsWith('_types.gen.d.ts'));
  return file ? path.join(folder, file) : null;
}

const pluginValidators = new Map();
function pluginValidator(type, part) {
  const key = `${type}.${part}`;
  if (!pluginValidators.has(key)) {
    const file = pluginFile(type);
    let validator = null;
    if (file && fs.readFileSync(file, 'utf8').includes(`export interface ${part}`)) {
      validator = ajv.compile(schemaOf(file, part));
    }
    pluginValidators.set(key, validator);
  }
  return pluginValidators.get(key);
}

function errors(validator, where) {
  return validator.errors.map((e) => `${where}${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`);
}

// The problems of one dashboard, and the panel plugins whose options could not be checked.
function check(dashboard) {
  const problems = validateDashboard(dashboard) ? [] : errors(validateDashboard, '');
  const unchecked = new Set();
  const panels = [];
  const walk = (list) => (list || []).forEach((panel) => panels.push(panel) && walk(panel.panels));
  walk(dashboard.panels);
  for (const panel of panels.filter((p) => p.type !== 'row')) {
    const parts = [['Options', panel.options], ['FieldConfig', panel.fieldConfig?.defaults?.custom]];
    for (const [part, value] of parts) {
      if (value === undefined) continue;
      const validator = pluginValidator(panel.type, part);
      if (!validator) {
        unchecked.add(`${panel.type} ${part}`);
      } else if (!validator(value)) {
        problems.push(...errors(validator, `panel "${panel.title}" ${part}`));
      }
    }
  }
  return { problems, unchecked };
}

function selfTest(file) {
  const broken = [
    ['an unknown dashboard field', (d) => (d.refreshEvery = '5s')],
    ['an unknown panel option', (d) => (d.panels.find((p) => p.type === 'timeseries').options.legendz = {})],
    ['a wrong type', (d) => (d.panels.find((p) => p.type === 'stat').options.reduceOptions.calcs = 'last')],
  ];
  let failed = 0;
  for (const [what, breakIt] of broken) {
    const dashboard = JSON.parse(fs.readFileSync(file, 'utf8'));
    breakIt(dashboard);
    const { problems } = check(dashboard);
    console.log(`${problems.length ? 'ok  ' : 'MISS'} ${what} is refused${problems.length ? `: ${problems[0]}` : ''}`);
    failed += problems.length ? 0 : 1;
  }
  return failed;
}

const args = process.argv.slice(2);
const files = args.filter((arg) => arg !== '--self-test');
let failed = 0;
for (const file of files) {
  if (args.includes('--self-test')) {
    failed += selfTest(file);
    continue;
  }
  const { problems, unchecked } = check(JSON.parse(fs.readFileSync(file, 'utf8')));
  for (const problem of problems) console.log(`${file}: ${problem}`);
  const note = unchecked.size ? ` (no published types, not checked: ${[...unchecked].join(', ')})` : '';
  console.log(`${file}: ${problems.length ? `${problems.length} problem(s)` : 'valid'} against @grafana/schema 11.3.0${note}`);
  failed += problems.length ? 1 : 0;
}
process.exit(failed ? 1 : 0);
