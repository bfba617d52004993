// A skills backend (SEP-2640) on the official TypeScript SDK v2, over stdio,
// for the gateway's tests: two skills with supporting files, one per page.
//
//   node skills_server.mjs [set]
//
// `set` picks the skills served: "a" (default) or "b" (other skills, one of
// them of the same name as a's, as a second backend would have). The tool
// `add_skill` adds the skill `added` and reloads the catalog, which
// announces the change with notifications/resources/list_changed; the tool
// `change_skill` rewrites a file of `git-workflow` (its digest changes) and
// reloads the same way.
import { McpServer } from '@modelcontextprotocol/server';
import { SkillsExtension, memorySkillFiles } from '@modelcontextprotocol/server/ext/skills';
import { serveStdio } from '@modelcontextprotocol/server/stdio';

const SETS = {
  a: {
    'git-workflow/SKILL.md':
      '---\nname: git-workflow\ndescription: Follow the team Git conventions\n---\n\n' +
      'Read references/BRANCHES.md before branching.\n',
    'git-workflow/references/BRANCHES.md': '# Branches\n\nfeature/<ticket>-<slug>\n',
    'acme/billing/refunds/SKILL.md':
      '---\nname: refunds\ndescription: Process refund requests per policy\nlicense: Apache-2.0\n---\n\n' +
      'Pick a template from templates/.\n',
    'acme/billing/refunds/templates/email.md': 'Dear customer, caf\u00e9 \u2713\n',
    'acme/billing/refunds/templates/letter.md': 'To whom it may concern,\n',
  },
  b: {
    'git-workflow/SKILL.md':
      '---\nname: git-workflow\ndescription: The other team conventions\n---\n\nRebase, never merge.\n',
    'pdf-processing/SKILL.md':
      '---\nname: pdf-processing\ndescription: Extract text from PDF documents\n---\n\nRun scripts/extract.py.\n',
    'pdf-processing/scripts/extract.py': 'print("extract")\n',
  },
};

const files = { ...SETS[process.argv[2] ?? 'a'] };
const skills = await SkillsExtension.load(memorySkillFiles(files), {
  pageSize: 1,
  cacheHint: { ttlMs: 60000, cacheScope: 'public' },
});

serveStdio(() => {
  const server = new McpServer(
    { name: 'skills-test-server', version: '1.0.0' },
    { capabilities: { resources: { listChanged: true } } },
  );
  skills.attach(server);
  server.registerTool('add_skill', { description: 'Add the skill "added"' }, async () => {
    files['added/SKILL.md'] = '---\nname: added\ndescription: Added at run time\n---\n\nNew.\n';
    const changes = await skills.reload();
    return { content: [{ type: 'text', text: JSON.stringify(changes) }] };
  });
  server.registerTool('change_skill', { description: 'Rewrite a file of git-workflow' }, async () => {
    files['git-workflow/references/BRANCHES.md'] = '# Branches\n\nanything goes\n';
    const changes = await skills.reload();
    return { content: [{ type: 'text', text: JSON.stringify(changes) }] };
  });
  return server;
});
