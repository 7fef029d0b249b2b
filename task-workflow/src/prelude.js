// The workflow hooks, installed before the script runs. `host` is the Rust side; this IIFE
// returns the function the host settles agent() calls with.
(host, MAX_ITEMS, BUDGET_TOTAL) => {
  'use strict';
  const pending = new Map();
  const deny = (what) => () => {
    throw new Error(`${what} is unavailable in workflow scripts (it would break resume); pass timestamps in through args and vary prompts or labels by index instead of randomness`);
  };

  // Determinism: no clock, no randomness.
  Math.random = deny('Math.random()');
  const RealDate = Date;
  function WorkflowDate(...parts) {
    if (!new.target || parts.length === 0) deny(new.target ? 'new Date()' : 'Date()')();
    return new RealDate(...parts);
  }
  WorkflowDate.prototype = RealDate.prototype;
  WorkflowDate.UTC = RealDate.UTC;
  WorkflowDate.parse = RealDate.parse;
  WorkflowDate.now = deny('Date.now()');
  Object.defineProperty(RealDate.prototype, 'constructor', { value: WorkflowDate });
  globalThis.Date = WorkflowDate;

  const checkItems = (hook, items) => {
    if (!Array.isArray(items)) throw new TypeError(`${hook}() takes an array`);
    if (items.length > MAX_ITEMS) {
      throw new RangeError(`${hook}() accepts at most ${MAX_ITEMS} items; got ${items.length}`);
    }
  };
  const orNull = (run) => {
    try {
      return Promise.resolve(run()).catch(() => null);
    } catch (error) {
      return Promise.resolve(null);
    }
  };

  globalThis.agent = (prompt, opts) => {
    if (typeof prompt !== 'string') throw new TypeError('agent(prompt, opts): prompt must be a string');
    if (opts !== undefined && (opts === null || typeof opts !== 'object' || Array.isArray(opts))) {
      throw new TypeError('agent(prompt, opts): opts must be an object');
    }
    for (const budget of ['maxTurns', 'maxTokens', 'timeout']) {
      const value = opts === undefined ? undefined : opts[budget];
      if (value !== undefined && !(Number.isSafeInteger(value) && value > 0)) {
        throw new TypeError(`agent(prompt, opts): opts.${budget} must be a positive integer`);
      }
    }
    const call = host.agent(prompt, JSON.stringify(opts === undefined ? {} : opts));
    return new Promise((resolve) => pending.set(call, resolve));
  };
  globalThis.parallel = (thunks) => {
    checkItems('parallel', thunks);
    return Promise.all(thunks.map((thunk) => orNull(thunk)));
  };
  globalThis.pipeline = (items, ...stages) => {
    checkItems('pipeline', items);
    return Promise.all(items.map((item, index) => orNull(async () => {
      let value = item;
      for (const stage of stages) value = await stage(value, item, index);
      return value;
    })));
  };
  globalThis.phase = (title) => host.phase(String(title));
  globalThis.log = (message) => host.log(typeof message === 'string' ? message : JSON.stringify(message));
  globalThis.budget = Object.freeze({
    total: BUDGET_TOTAL,
    spent: () => host.spent(),
    remaining: () => (BUDGET_TOTAL === null ? Infinity : Math.max(0, BUDGET_TOTAL - host.spent())),
  });
  const nested = () => {
    throw new Error('workflow() nests one level only: a child workflow cannot start another');
  };
  globalThis.workflow = async (reference, childArgs) => {
    const child = (0, eval)(host.loadWorkflow(JSON.stringify(reference)));
    return child(childArgs, nested);
  };

  return (call, json) => {
    const resolve = pending.get(call);
    if (resolve === undefined) return;
    pending.delete(call);
    resolve(JSON.parse(json));
  };
}
