// mongosh smoke test against hourglass. Any failed check throws, so mongosh exits non-zero.
function check(cond, what) {
  if (!cond) {
    throw new Error('smoke check failed: ' + what);
  }
}

const t = db.getSiblingDB('mongosh_smoke');
t.dropDatabase();

// insertOne + find
const ins = t.people.insertOne({ name: 'ada', born: 1815 });
check(ins.acknowledged === true, 'insertOne acknowledged');
check(ins.insertedId !== undefined, 'insertOne returned an id');
const found = t.people.find({ name: 'ada' }).toArray();
check(found.length === 1, 'find returns the inserted document, got ' + found.length);
check(found[0].born === 1815, 'found document has born 1815, got ' + found[0].born);
check(String(found[0]._id) === String(ins.insertedId), 'ids match');

// updateOne with upsert and $inc
const up1 = t.counters.updateOne({ _id: 'hits' }, { $inc: { n: 1 } }, { upsert: true });
// mongosh reports the upserted _id as insertedId (older versions: upsertedId)
const upId = up1.upsertedId !== undefined ? up1.upsertedId : up1.insertedId;
check(up1.upsertedCount === 1 && up1.matchedCount === 0, 'first update upserted');
check(upId === 'hits', 'upsert reports the upserted id hits, got ' + upId);
const up2 = t.counters.updateOne({ _id: 'hits' }, { $inc: { n: 41 } }, { upsert: true });
check(up2.matchedCount === 1 && up2.modifiedCount === 1, 'second update matched and modified');
const counter = t.counters.findOne({ _id: 'hits' });
check(counter.n === 42, 'counter is 42, got ' + counter.n);

// show dbs equivalent
const dbs = db.adminCommand({ listDatabases: 1 });
check(dbs.ok === 1, 'listDatabases ok');
const names = dbs.databases.map((d) => d.name);
check(names.includes('mongosh_smoke'), 'listDatabases includes mongosh_smoke: ' + names.join(','));
const mine = dbs.databases.find((d) => d.name === 'mongosh_smoke');
check(Number(mine.sizeOnDisk) > 0 && mine.empty === false, 'show dbs gives a size: ' + JSON.stringify(mine));

// a few more everyday shell helpers
t.people.insertMany([{ name: 'bob', born: 1900 }, { name: 'cy', born: 1950 }]);
check(t.people.countDocuments({ born: { $gt: 1850 } }) === 2, 'countDocuments');
const sorted = t.people.find({}, { _id: 0, name: 1 }).sort({ born: -1 }).toArray().map((d) => d.name);
check(JSON.stringify(sorted) === JSON.stringify(['cy', 'bob', 'ada']), 'sort desc: ' + sorted);
check(t.getCollectionNames().sort().join(',') === 'counters,people', 'collection names: ' + t.getCollectionNames());

// a time-series collection, as a shell user creates one
t.createCollection('weather', { timeseries: { timeField: 'ts', metaField: 'sensor' } });
const base = new Date('2026-01-01T00:00:00Z').getTime();
t.weather.insertMany([0, 1, 2].map((i) => ({ ts: new Date(base + i * 1000), sensor: 'a', temp: 20 + i })));
check(t.weather.countDocuments({ temp: { $gte: 21 } }) === 2, 'time-series countDocuments');
check(t.getCollection('system.buckets.weather').countDocuments({}) === 1, 'one bucket for one series');
const info = t.getCollectionInfos({ name: 'weather' })[0];
check(info.type === 'timeseries', 'weather is a time-series collection');
const checked = t.weather.validate({ full: true });
check(checked.ok === 1 && checked.valid === true && Number(checked.nrecords) === 1 &&
      checked.warnings.length === 0, 'db.weather.validate({full: true}): ' + JSON.stringify(checked));

// operator helpers: db.currentOp() (the $currentOp stage) and db.fsyncLock()/fsyncUnlock()
const ops = db.currentOp();
check(ops.ok === 1 && Array.isArray(ops.inprog) && ops.inprog.length > 0, 'db.currentOp() lists operations');
const locked = db.fsyncLock();
check(locked.ok === 1 && Number(locked.lockCount) === 1, 'db.fsyncLock(): ' + JSON.stringify(locked));
check(t.people.countDocuments({}) === 3, 'reads go on under fsyncLock');
const unlocked = db.fsyncUnlock();
check(unlocked.ok === 1 && Number(unlocked.lockCount) === 0, 'db.fsyncUnlock(): ' + JSON.stringify(unlocked));
t.people.insertOne({ name: 'after-unlock' });
check(t.people.countDocuments({}) === 4, 'writes proceed after fsyncUnlock');

// the profiler: db.setProfilingLevel(2), then db.system.profile.find()
const was = t.setProfilingLevel(2);
check(was.ok === 1 && was.was === 0, 'db.setProfilingLevel(2): ' + JSON.stringify(was));
t.people.find({ name: 'ada' }).toArray();
const profiled = t.system.profile.find({ op: 'query', ns: 'mongosh_smoke.people' }).toArray();
check(profiled.length >= 1 && profiled[0].command.filter.name === 'ada' && profiled[0].planSummary === 'COLLSCAN',
      'db.system.profile.find(): ' + JSON.stringify(profiled));
check(t.getProfilingStatus().was === 2, 'db.getProfilingStatus()');
t.setProfilingLevel(0);

// a transaction: session.startTransaction(), commitTransaction(), abortTransaction()
t.accounts.insertOne({ _id: 'a', balance: 10 });
const session = db.getMongo().startSession();
const accounts = session.getDatabase('mongosh_smoke').accounts;
session.startTransaction();
accounts.updateOne({ _id: 'a' }, { $inc: { balance: -5 } });
accounts.insertOne({ _id: 'b', balance: 5 });
check(t.accounts.countDocuments({}) === 1, 'a transaction\'s writes are not seen outside it');
check(accounts.countDocuments({}) === 2, 'a transaction sees its own writes');
session.commitTransaction();
check(t.accounts.findOne({ _id: 'a' }).balance === 5 && t.accounts.countDocuments({}) === 2,
      'session.commitTransaction() applies both writes');
session.startTransaction();
accounts.deleteMany({});
session.abortTransaction();
check(t.accounts.countDocuments({}) === 2, 'session.abortTransaction() leaves nothing');
session.endSession();

t.dropDatabase();
print('mongosh smoke: all checks passed');
