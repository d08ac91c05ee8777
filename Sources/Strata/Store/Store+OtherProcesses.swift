import Foundation
import StrataEngine
import Synchronization

/// Saves of other processes. Contexts of one process tell each other of
/// their saves directly (``MergeHub``); another process's saves reach this
/// one through the store's history, which every save records: at each
/// entry point a context asks the engine whether anything committed since
/// it last looked (one atomic load when nothing did), and if so reads the
/// history transactions this process has not seen and merges them into
/// every context of the store like a save of its own.
///
/// An update refreshes every field of the row's registered models (the
/// history names attributes, not values); a change to any row of an entity
/// refreshes, on every registered model, the to-many relationships that
/// lead to that entity (their other side may have moved). Saves made with
/// `recordsHistory` off leave no history: other processes see their rows
/// on the next fetch but do not refresh models they already hold.
extension Store {
    /// The last history token this store's contexts have merged or
    /// written, and the engine's commit stamp when that was checked.
    final class OtherProcesses: Sendable {
        let seen = Locked<(token: Int64?, stamp: UInt64)>((nil, .max))
        /// Tokens of this process's saves that wrote their history but
        /// have not finished: with group commit, a save's history is in
        /// the log (and read by the next save's transaction) before the
        /// save that wrote it records it as seen. They are not another
        /// process's.
        let ownUnfinished = Locked<Set<Int64>>([])
        /// Held while other processes' saves are read and published, so
        /// that two threads catching up do not publish one save twice.
        let catchingUp = Lock()
        /// True while a watcher thread polls for other processes' commits
        /// (see ``Store/watchOtherProcesses()``).
        let watching = Atomic<Bool>(false)
        /// The commit stamp at which reading other processes' saves last
        /// failed (observers were told once for it).
        let failedStamp = Locked<UInt64?>(nil)
    }

    /// How often the watcher looks for other processes' commits: the
    /// delay, at most, before their saves reach live observers here.
    static let watchInterval: UInt32 = 1_000  // microseconds

    /// Starts, unless one runs, a thread that looks for other processes'
    /// commits every ``watchInterval`` while live observers exist, and
    /// publishes them as ``catchUpWithOtherProcesses()`` does. A look is
    /// one read of the engine's commit stamp from shared memory when
    /// nothing committed. The thread ends when the last observer goes or
    /// the store closes.
    func watchOtherProcesses() {
        guard target.ownsFile,
            otherProcesses.watching.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
        else { return }
        let thread = Thread { [weak self] in
            while let store = self, store.watchOnce() {
                usleep(Self.watchInterval)
            }
        }
        thread.name = "strata.watch"
        thread.start()
    }

    /// One look of the watcher; false when it should stop.
    private func watchOnce() -> Bool {
        guard mergeHub.hasObservers else {
            otherProcesses.watching.store(false, ordering: .releasing)
            // An observer that registered just now saw a watcher running.
            return mergeHub.hasObservers
                && otherProcesses.watching.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing)
                    .exchanged
        }
        do {
            try catchUpWithOtherProcesses()
        } catch let error as StorageError where error == .closed {
            otherProcesses.watching.store(false, ordering: .releasing)
            return false
        } catch {
            // The history cannot be read (damaged): every observer re-runs
            // once per commit and meets the damage itself, if it reads it.
            let stamp = try? database.commitStamp()
            let first = otherProcesses.failedStamp.withLock { failed in
                defer { failed = stamp }
                return failed != stamp
            }
            if first { mergeHub.markAllObservers() }
        }
        return true
    }

    /// A save of this process wrote its history as `token`.
    func wroteHistory(_ token: Int64) {
        otherProcesses.ownUnfinished.withLock { _ = $0.insert(token) }
    }

    /// The save that wrote history `token` finished (committed or not).
    func finishedHistory(_ token: Int64) {
        otherProcesses.ownUnfinished.withLock { _ = $0.remove(token) }
    }

    /// The history transactions after the last one seen, as changes to
    /// merge, and the last token they reach; nil when there are none.
    /// `last`: the last token issued in `tx`, when the caller read it.
    func changesOfOtherSaves(
        in tx: ReadTransaction, last known: Int64? = nil
    ) throws -> (changes: SavedChanges, through: Int64)? {
        let last = try known ?? HistoryLog.lastToken(tx)
        let seen = otherProcesses.seen.withLock { state -> Int64 in
            if state.token == nil { state.token = last }
            return state.token!
        }
        guard last > seen else { return nil }
        // Saves of this process that have not finished yet (group commit
        // lets several be in the log at once) are not another process's:
        // when they are all there is, nothing is read.
        let own = otherProcesses.ownUnfinished.withLock { $0 }
        if last - seen <= Int64(own.count), ((seen + 1)...last).allSatisfy(own.contains) { return nil }
        var builder = SavedChanges.Builder(entityCount: schema.entities.count)
        var touched = Set<String>()
        var inserts = [[Int64]](repeating: [], count: schema.entities.count)
        for raw in try HistoryLog.readRaw(tx, after: seen, through: last, skipping: own) {
            for change in raw.changes {
                guard let entity = schema.entitiesByName[change.entity] else { continue }
                touched.insert(entity.name)
                switch change.kind {
                case .insert: inserts[entity.ordinal].append(change.row)
                case .update: builder.update(entity, row: change.row, fields: _FieldSet(all: entity.properties.count))
                case .delete: builder.delete(entity, rows: [change.row])
                }
            }
        }
        var everywhere = [_FieldSet](repeating: _FieldSet(), count: schema.entities.count)
        for entity in schema.entities {
            for (index, property) in entity.properties.enumerated() {
                guard let relationship = property as? Schema.Relationship, !relationship.isToOneRelationship,
                    touched.contains(relationship.destination)
                else { continue }
                everywhere[entity.ordinal].insert(index)
            }
        }
        return (builder.build(everywhere: everywhere, inserts: inserts), last)
    }

    /// Records that history through `token` has been merged or written.
    func sawHistory(through token: Int64) {
        otherProcesses.seen.withLock { state in state.token = max(state.token ?? token, token) }
    }

    /// A save of this store committed and left the store at `stamp`,
    /// having merged every other save before it.
    func sawCommit(_ stamp: UInt64) {
        guard target.ownsFile else { return }
        otherProcesses.seen.withLock { $0.stamp = stamp }
    }

    /// Merges other processes' saves committed since the last look into
    /// every context of the store; a no-op when nothing committed.
    ///
    /// Serialized: two threads never read, and publish, one save twice,
    /// and a context that returns from here has every save found so far
    /// in its mailbox. What publishing runs (a ``LiveQuery``'s Observation
    /// handlers) may call back into a context on the same thread; that
    /// call does not catch up again.
    func catchUpWithOtherProcesses() throws {
        guard target.ownsFile else { return }
        guard otherProcesses.seen.withLock({ $0.stamp }) != (try database.commitStamp()) else { return }
        let marker = Thread.current.threadDictionary
        guard marker[Self.catchingUpKey] == nil else { return }
        marker[Self.catchingUpKey] = true
        defer { marker[Self.catchingUpKey] = nil }
        try otherProcesses.catchingUp.withLock {
            // Another thread may have caught up while this one waited.
            let stamp = try database.commitStamp()
            guard otherProcesses.seen.withLock({ $0.stamp }) != stamp else { return }
            let found = try database.read { tx -> (SavedChanges, Int64)? in
                try changesOfOtherSaves(in: tx).map { ($0.changes, $0.through) }
            }
            if let (changes, through) = found {
                mergeHub.publish(changes, from: nil)
                sawHistory(through: through)
            }
            otherProcesses.seen.withLock { $0.stamp = stamp }
        }
    }

    /// Set in a thread's dictionary while it catches up.
    private static let catchingUpKey = "strata.catchingUp"
}
