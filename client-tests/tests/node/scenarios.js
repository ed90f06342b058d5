'use strict';
/**
 * node-zookeeper-client (npm, pinned in package.json) against one server:
 * CRUD with versions, sequential and ephemeral nodes, transactions (a commit
 * and failing ones with rollback), watches fired by a second client, ACLs
 * with digest auth, create with flags 4 (the package has no CONTAINER mode
 * and no createContainer; a numeric mode 4 is sent as-is with opcode 1) and
 * exists on missing nodes.
 *
 * Prints one JSON line: an object of observations in program order, with
 * session ids replaced by "A"/"B" and times left out. zxids are kept: a fresh
 * zkd assigns the same zxids as ZooKeeper to the same ops.
 * tests/node_client.rs runs this against Apache ZooKeeper 3.8 and zkd (both
 * with znode.container.checkIntervalMs=100) and requires identical output.
 *
 * Usage: node scenarios.js HOST:PORT
 */
const crypto = require('crypto');
const zookeeper = require('node-zookeeper-client');

const { ACL, CreateMode, Id, Permission } = zookeeper;

const HOSTS = process.argv[2];
/** Bound for connecting and for each awaited watch event. */
const WAIT_MS = 10000;
/** Ten container checks at 100 ms. */
const PAST_CHECKS_MS = 1000;
/** Flags 4: CONTAINER in ZooKeeper's CreateMode, not exposed by this package. */
const CONTAINER_FLAGS = 4;

const obs = {};
const sessions = {};

/** Records `value` under a label that must be new. */
function record(label, value) {
    if (Object.prototype.hasOwnProperty.call(obs, label)) {
        throw new Error('duplicate label ' + label);
    }
    obs[label] = value;
}

// Whatever happens, the process ends within a minute, saying how far it got.
setTimeout(() => {
    record('watchdog', 'scenarios did not finish within 60 s');
    console.log(JSON.stringify(obs));
    process.exit(3);
}, 60000).unref();

function hex(buffer) {
    return '0x' + buffer.readBigUInt64BE(0).toString(16);
}

/** A stat without times, the owner named after the session that owns it. */
function showStat(stat) {
    if (!stat) {
        return null;
    }
    let owner = 'other:' + hex(stat.ephemeralOwner);
    if (stat.ephemeralOwner.readBigUInt64BE(0) === 0n) {
        owner = '0';
    }
    for (const [name, id] of Object.entries(sessions)) {
        if (stat.ephemeralOwner.equals(id)) {
            owner = name;
        }
    }
    return {
        czxid: hex(stat.czxid),
        mzxid: hex(stat.mzxid),
        pzxid: hex(stat.pzxid),
        version: stat.version,
        cversion: stat.cversion,
        aversion: stat.aversion,
        ephemeralOwner: owner,
        dataLength: stat.dataLength,
        numChildren: stat.numChildren,
    };
}

function showData(data) {
    return data === null || data === undefined ? null : data.toString('utf8');
}

function showAcls(acls) {
    return acls.map((a) => ({ perms: a.permission, scheme: a.id.scheme, id: a.id.id }));
}

function showResults(results) {
    return (results || []).map((r) => {
        const out = { type: r.type };
        if (r.err !== undefined) out.err = r.err;
        if (r.path !== undefined) out.path = r.path;
        if (r.stat !== undefined) out.stat = showStat(r.stat);
        return out;
    });
}

/**
 * Calls `start(callback)` and records the outcome: the error's name
 * (e.g. NO_NODE), or `show(...results)`. Resolves to the results, or
 * undefined on error.
 */
function step(label, start, show) {
    return new Promise((resolve) => {
        start((error, ...results) => {
            if (error) {
                record(label, { error: error.name || String(error) });
                resolve(undefined);
            } else {
                record(label, show ? show(...results) : results.length ? results[0] : 'ok');
                resolve(results);
            }
        });
    });
}

/** A transaction's outcome: the error that failed it (if any) and every result. */
function commit(label, tx) {
    return new Promise((resolve) => {
        tx.commit((error, results) => {
            record(label, {
                error: error ? error.name || String(error) : null,
                results: showResults(results),
            });
            resolve();
        });
    });
}

function sleep(ms) {
    return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `pred` every 10 ms for at most WAIT_MS; true if it came to hold. */
async function waitFor(pred) {
    const deadline = Date.now() + WAIT_MS;
    while (!pred()) {
        if (Date.now() > deadline) {
            return false;
        }
        await sleep(10);
    }
    return true;
}

/** Connects a client named `name`, failing after WAIT_MS. */
function connect(name) {
    return new Promise((resolve, reject) => {
        const client = zookeeper.createClient(HOSTS, { sessionTimeout: 10000, retries: 0 });
        const timer = setTimeout(() => reject(new Error(name + ': connect timed out')), WAIT_MS);
        client.once('connected', () => {
            clearTimeout(timer);
            sessions[name] = client.getSessionId();
            resolve(client);
        });
        client.connect();
    });
}

function digest(user, password) {
    const hash = crypto.createHash('sha1').update(user + ':' + password).digest('base64');
    return user + ':' + hash;
}

async function main() {
    const a = await connect('A');
    const b = await connect('B');
    record('session timeouts', [a.getSessionTimeout(), b.getSessionTimeout()]);
    const data = (s) => Buffer.from(s);

    // exists and reads on missing nodes.
    await step('exists /nope', (cb) => a.exists('/nope', cb), showStat);
    await step('exists /nope/deeper', (cb) => a.exists('/nope/deeper', cb), showStat);
    await step('getData /nope', (cb) => a.getData('/nope', cb), showData);
    await step('getChildren /nope', (cb) => a.getChildren('/nope', cb));
    await step('setData /nope', (cb) => a.setData('/nope', data('x'), -1, cb), showStat);
    await step('remove /nope', (cb) => a.remove('/nope', -1, cb));
    await step('create /nope/kid', (cb) => a.create('/nope/kid', cb));

    // CRUD with versions.
    await step('create /crud', (cb) => a.create('/crud', data('v1'), cb));
    await step('getData /crud', (cb) => a.getData('/crud', cb), (d, s) => [showData(d), showStat(s)]);
    await step('setData /crud v2 @0', (cb) => a.setData('/crud', data('v2'), 0, cb), showStat);
    await step('setData /crud v3 @0', (cb) => a.setData('/crud', data('v3'), 0, cb), showStat);
    await step('create /crud again', (cb) => a.create('/crud', data(''), cb));
    await step('create /crud/kid', (cb) => a.create('/crud/kid', data('k'), cb));
    await step('remove /crud (not empty)', (cb) => a.remove('/crud', -1, cb));
    await step('getChildren /crud', (cb) => a.getChildren('/crud', cb), (c, s) => [c, showStat(s)]);
    await step('remove /crud/kid @3', (cb) => a.remove('/crud/kid', 3, cb));
    await step('remove /crud/kid @0', (cb) => a.remove('/crud/kid', 0, cb));
    await step('exists /crud', (cb) => a.exists('/crud', cb), showStat);
    // No data (sent as a null buffer, length -1) versus empty data.
    await step('create /nodata (null)', (cb) => a.create('/nodata', cb));
    await step('getData /nodata', (cb) => a.getData('/nodata', cb), (d, s) => [showData(d), showStat(s)]);
    await step('setData /nodata empty', (cb) => a.setData('/nodata', Buffer.alloc(0), -1, cb), showStat);
    await step('getData /nodata after empty', (cb) => a.getData('/nodata', cb), (d) => showData(d));

    // listSubTreeBFS of this package (with async 3) lists only the first
    // level, so removeRecursive of a deeper tree fails NOT_EMPTY on any server.
    await step('mkdirp /deep/a/b/c', (cb) => a.mkdirp('/deep/a/b/c', data('d'), cb));
    await step('listSubTreeBFS /deep', (cb) => a.listSubTreeBFS('/deep', cb));
    await step('removeRecursive /deep', (cb) => a.removeRecursive('/deep', cb));
    await step('exists /deep', (cb) => a.exists('/deep', cb), showStat);

    // Sequential and ephemeral nodes.
    await step('create /seq', (cb) => a.create('/seq', cb));
    const seq = CreateMode.PERSISTENT_SEQUENTIAL;
    await step('create /seq/s- #1', (cb) => a.create('/seq/s-', data(''), seq, cb));
    await step('create /seq/s- #2', (cb) => a.create('/seq/s-', data(''), seq, cb));
    await step('create /seq/e-', (cb) => a.create('/seq/e-', data(''), CreateMode.EPHEMERAL_SEQUENTIAL, cb));
    await step('create /seq/eph', (cb) => a.create('/seq/eph', data('e'), CreateMode.EPHEMERAL, cb));
    await step('exists /seq/eph', (cb) => a.exists('/seq/eph', cb), showStat);
    await step('create /seq/eph/kid', (cb) => a.create('/seq/eph/kid', cb));
    await step('getChildren /seq', (cb) => a.getChildren('/seq', cb), (c, s) => [c.sort(), showStat(s)]);

    // Transactions: one commit, two rolled back.
    await step('create /tx', (cb) => a.create('/tx', cb));
    await commit(
        'multi commit',
        a.transaction()
            .create('/tx/t1', data('1'))
            .setData('/crud', data('v4'), 1)
            .check('/crud', 2)
            .remove('/seq/s-0000000000', -1)
    );
    await step('getData /crud after multi', (cb) => a.getData('/crud', cb), (d, s) => [showData(d), showStat(s)]);
    await commit(
        'multi bad version',
        a.transaction().create('/tx/t3', data('3')).setData('/crud', data('x'), 99).create('/tx/t4')
    );
    await commit('multi missing first', a.transaction().remove('/tx/missing', -1).create('/tx/t5'));
    await commit('multi duplicate create', a.transaction().create('/tx/t6').create('/tx/t6'));
    await step('getChildren /tx after rollbacks', (cb) => a.getChildren('/tx', cb), (c, s) => [c.sort(), showStat(s)]);

    // Watches set by B, fired by A's writes.
    const events = [];
    const watcher = (tag) => (event) => events.push(tag + ' ' + event.getName() + ' ' + event.getPath());
    await step('B getData /crud +watch', (cb) => b.getData('/crud', watcher('data'), cb), showData);
    await step('A setData /crud', (cb) => a.setData('/crud', data('v5'), -1, cb), showStat);
    record('data watch fired', await waitFor(() => events.length >= 1));
    await step('B getChildren /tx +watch', (cb) => b.getChildren('/tx', watcher('child'), cb), (c) => c.sort());
    await step('B exists /tx/x +watch', (cb) => b.exists('/tx/x', watcher('exists'), cb), showStat);
    await step('A create /tx/x', (cb) => a.create('/tx/x', data('x'), cb));
    record('child and exists watches fired', await waitFor(() => events.length >= 3));
    await step('B getData /tx/x +watch', (cb) => b.getData('/tx/x', watcher('data'), cb), showData);
    await step('B getChildren /tx +watch again', (cb) => b.getChildren('/tx', watcher('child'), cb), (c) => c.sort());
    await step('A remove /tx/x', (cb) => a.remove('/tx/x', -1, cb));
    record('delete watches fired', await waitFor(() => events.length >= 5));
    await sleep(100);
    record('events at B', events.slice());

    // ACLs with digest auth.
    a.addAuthInfo('digest', data('alice:secret'));
    await step('A create /acl CREATOR_ALL', (cb) => a.create('/acl', data('s'), ACL.CREATOR_ALL_ACL, cb));
    await step('A getACL /acl', (cb) => a.getACL('/acl', cb), (acls, s) => [showAcls(acls), showStat(s)]);
    await step('B getData /acl', (cb) => b.getData('/acl', cb), showData);
    await step('B create /acl/kid', (cb) => b.create('/acl/kid', cb));
    await step('B create /acl2 CREATOR_ALL (no auth)', (cb) => b.create('/acl2', data(''), ACL.CREATOR_ALL_ACL, cb));
    const aliceAll = new ACL(Permission.ALL, new Id('digest', digest('alice', 'secret')));
    const worldRead = new ACL(Permission.READ, new Id('world', 'anyone'));
    const bobAll = new ACL(Permission.ALL, new Id('digest', digest('bob', 'pw')));
    await step('A create /acl3 alice+world-read', (cb) => a.create('/acl3', data('r'), [aliceAll, worldRead], cb));
    await step('B getData /acl3', (cb) => b.getData('/acl3', cb), showData);
    await step('B setData /acl3', (cb) => b.setData('/acl3', data('w'), -1, cb), showStat);
    await step('A setACL /acl @0', (cb) => a.setACL('/acl', [worldRead, bobAll], 0, cb), showStat);
    await step('A setACL /acl @0 again', (cb) => a.setACL('/acl', [worldRead], 0, cb), showStat);
    await step('B getData /acl after setACL', (cb) => b.getData('/acl', cb), showData);
    await step('A setData /acl (read-only now)', (cb) => a.setData('/acl', data('a'), -1, cb), showStat);
    b.addAuthInfo('digest', data('bob:wrong'));
    await step('B setData /acl wrong password', (cb) => b.setData('/acl', data('b'), -1, cb), showStat);
    b.addAuthInfo('digest', data('bob:pw'));
    await step('B setData /acl as bob', (cb) => b.setData('/acl', data('b'), -1, cb), showStat);
    await step('B getACL /acl', (cb) => b.getACL('/acl', cb), (acls, s) => [showAcls(acls), showStat(s)]);
    await step('getACL /nope', (cb) => a.getACL('/nope', cb), (acls, s) => [showAcls(acls), showStat(s)]);
    await step('setACL /nope', (cb) => a.setACL('/nope', [worldRead], -1, cb), showStat);

    // Flags 4 with opcode 1: an ordinary persistent node that the container
    // reaper leaves alone. (Not inside a multi: there ZooKeeper rebuilds the
    // op from its flags, makes a real container and answers result type 15,
    // which this package cannot parse: it throws and the process dies.)
    await step('create /cont flags 4', (cb) => a.create('/cont', data('c'), CONTAINER_FLAGS, cb));
    await step('exists /cont', (cb) => a.exists('/cont', cb), showStat);
    await step('create /cont/kid', (cb) => a.create('/cont/kid', cb));
    await step('remove /cont/kid', (cb) => a.remove('/cont/kid', -1, cb));
    await step('create /never flags 4', (cb) => a.create('/never', data(''), CONTAINER_FLAGS, cb));
    await sleep(PAST_CHECKS_MS);
    await step('exists /cont after idle', (cb) => a.exists('/cont', cb), showStat);
    await step('exists /never after idle', (cb) => a.exists('/never', cb), showStat);
    await step('create /cont/again after idle', (cb) => a.create('/cont/again', cb));

    // Closing A's session removes its ephemerals; B sees it.
    let gone = false;
    await step('B exists /seq/eph +watch', (cb) => b.exists('/seq/eph', () => (gone = true), cb), showStat);
    a.close();
    record('ephemeral deletion seen by B', await waitFor(() => gone));
    await step('B getChildren /seq after close', (cb) => b.getChildren('/seq', cb), (c, s) => [c.sort(), showStat(s)]);
    await step('B exists /seq/eph after close', (cb) => b.exists('/seq/eph', cb), showStat);
    await step('B getChildren /', (cb) => b.getChildren('/', cb), (c, s) => [c.sort(), showStat(s)]);
    await step('B getChildren /zookeeper', (cb) => b.getChildren('/zookeeper', cb), (c) => c.sort());
    b.close();
    console.log(JSON.stringify(obs));
}

main().then(
    () => process.exit(0),
    (error) => {
        record('failed', String(error && error.stack ? error.stack : error));
        console.log(JSON.stringify(obs));
        process.exit(2);
    }
);
