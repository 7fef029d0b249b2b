export const meta = {name: 'n', description: 'd', phases: [], extra: {hex: 0x1F, inf: Infinity, neg: -.5e3, 'quoted-key': null, trailing: [1,2,],},}
return 1
