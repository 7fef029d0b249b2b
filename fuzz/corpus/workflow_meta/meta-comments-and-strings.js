// a workflow
/* with a block comment */
export const meta = {
  name: 'count-things', description: "counts } and ] in 'quotes'", // trailing }
  whenToUse: `when you need ${'{'}counts`,
  phases: [{ title: 'Scan', detail: 'look', model: 'haiku' }, { title: 'Sum' }],
};
phase('Scan')
const a = await agent('count', {label: 'scan:a'})
