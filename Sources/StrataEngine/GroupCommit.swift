import Synchronization

/// Group commit: with durability `full`, a commit's frames are appended to
/// the log under the writer gate, then the gate is released and the commit
/// waits for a sync of the log. The first waiter syncs (the *leader*) and
/// publishes every commit appended before its sync began; commits appended
/// while that sync runs wait for the next one, which one of them leads. A
/// lone committer pays one sync, as before; sixteen threads committing at
/// once pay a few.
///
/// Rules:
/// - A commit appended but not yet published (*pending*) is visible to the
///   next writer of this handle only: it reads the pending commits' pages
///   (``continuation()``) and appends after their frames. Readers
///   see a commit once it is durable and published.
/// - Pending commits are published in append order, by the leader alone,
///   holding the shared index's writer lock: this handle keeps the lock
///   from the first append until the last pending commit is published and
///   no writer of this handle is inside a transaction.
/// - A small commit's frames are built and chained under the gate, and
///   written by its own thread once it has released the gate (the next
///   writer's transaction runs meanwhile); the leader syncs only commits
///   whose frames are written. A write that fails fails that commit and
///   every later pending one, which lie after the hole (see
///   `writeFailure`); the handle goes on from the commit before it.
/// - A failed sync fails every pending commit (none is reported durable),
///   and poisons the handle: the frames past the published state are
///   ignored by recovery unless whole, and overwritten by the next writer.
/// - Restarts and checkpoints run only when nothing is pending.
///
/// The type owns the whole of it: the queue, the leader's sync of the log,
/// publishing (every commit is published here, the group's and those of
/// durability below `full`) and poisoning the handle after a failed fsync;
/// it calls the log, the page cache and the catalog cache directly.
///
/// The queue's fields are guarded by `condition`: lock 6 of the order
/// stated in Lock.swift (after the writer gate and the shared writer lock,
/// before the database's state lock). `poisoned`, `commits` and `logSyncs`
/// are guarded by the state lock (lock 7), as the log's and the pager's
/// fields are.
final class GroupCommit: @unchecked Sendable {
    /// One commit appended to the log and waiting for its sync.
    struct Entry {
        var ticket: UInt64
        var pages: [(number: UInt32, page: Page)]
        var first: Int
        var tail: WAL.LogTail
        var header: FileHeader
        var freelist: Freelist
        /// The commit wrote pages into the main file too (it spilled).
        var mainChanged: Bool
        /// Page numbers of the frames it spilled to the log, from `first`
        /// on (its pages follow them). A commit with spilled frames is
        /// published before its writer releases the gate, so no
        /// continuation ever needs them.
        var spilled: [UInt32]
        /// Its frames are in the log, or their write failed (see
        /// `writeFailure`): false while its thread writes them, after
        /// releasing the gate.
        var written: Bool
    }

    private let wal: WAL
    private let pager: Pager
    private let catalog: CatalogCache
    /// The database's state lock (lock 7), the log's and the pager's.
    private let stateLock: Lock

    /// Set when an fsync failed: the handle refuses writes from then on.
    /// Guarded by the state lock.
    @exclusivity(unchecked) var poisoned: String?
    /// Commits published and syncs of the log made by the group's leaders
    /// (the handle's ``Statistics``). Guarded by the state lock.
    @exclusivity(unchecked) var commits = 0
    @exclusivity(unchecked) var logSyncs = 0

    init(wal: WAL, pager: Pager, catalog: CatalogCache) {
        self.wal = wal
        self.pager = pager
        self.catalog = catalog
        stateLock = wal.lock
    }

    private let condition = Condition()
    /// The commits waiting for a sync, by the sync's parity (keys read
    /// under `condition`): a sync that ends wakes the commits it covered,
    /// and one of those it did not to lead the next, not everyone. A woken
    /// commit finds itself published in `published` without taking
    /// `condition`, which the next writer needs to append.
    private let syncEnds = [EventCount(), EventCount()]
    #if os(Linux)
        /// The wake calls the ends of syncs made (for tests).
        var syncWakes: Int { syncEnds[0].wakes + syncEnds[1].wakes }
    #endif
    /// Every ticket up to this one is published. Written under `condition`
    /// once the commits are published; waiters read it without the lock.
    private let published = Atomic<UInt64>(0)
    /// Syncs led so far; the one running, while `syncing`, is this one.
    private var syncNumber = 0
    /// The last ticket the running sync covers, while `syncing`.
    private var syncingThrough: UInt64 = 0
    /// Threads in ``waitUntilIdle()``.
    private var idleWaiters = 0
    /// The leader waits for commits in its batch to be written.
    private var leaderWaitsForWrites = false
    /// Appended, not yet published, in append order (the leader's batch
    /// stays here until it is published).
    private var entries: [Entry] = []
    private var nextTicket: UInt64 = 1
    /// A leader is syncing and publishing.
    private var syncing = false
    /// Tickets up to `through` failed with `error`.
    private var failure: (through: UInt64, error: any Error)?
    /// A commit whose frames its thread writes after releasing the gate
    /// (``wrote(_:error:)``) could not write them: every pending commit
    /// from ticket `from` on lies after that hole and fails. The failure is
    /// *open* until the thread of every such commit has reported its own
    /// write, so no frames are still being written where the next writer
    /// will append; meanwhile nothing is enqueued. Then it closes: those
    /// commits leave the queue, the next writer appends after the last one
    /// before them, and the handle goes on (a failed sync poisons it; a
    /// failed write, a full disk, leaves the log as it was).
    private var writeFailure: (from: UInt64, error: any Error)?
    /// The error of the last write failure, for a transaction that
    /// continued from a commit it took away (``enqueue(_:after:)``).
    private var lastWriteError: (any Error)?
    /// The commits a closed write failure took away, with its error, until
    /// each one's thread has looked (``awaitPublished(_:)``): later tickets
    /// are published past theirs. Their number is `failedCount` (read
    /// without the lock by the fast path, which must not report a failed
    /// commit published).
    private var failedTickets: [UInt64: any Error] = [:]
    private let failedCount = Atomic<Int>(0)
    /// This handle holds the shared index's writer lock for the group.
    private var lockHeld = false
    /// A write transaction of this handle is between its begin and its
    /// append (or rollback).
    private var writerInside = false

    /// What a writer beginning now continues from: the last pending
    /// commit's tail, header and free pages, and the pending pages by
    /// number (newest image). Nil when nothing is pending. The caller holds
    /// the gate.
    func continuation() -> (
        tail: WAL.LogTail, header: FileHeader, freelist: Freelist, overlay: [UInt32: Page], ticket: UInt64
    )? {
        condition.withLock {
            guard let last = entries.last else { return nil }
            var overlay: [UInt32: Page] = [:]
            for entry in entries { for (number, page) in entry.pages { overlay[number] = page } }
            return (last.tail, last.header, last.freelist, overlay, last.ticket)
        }
    }

    /// The tail of the last pending commit, if any. The caller holds the
    /// gate.
    var tail: WAL.LogTail? { condition.withLock { entries.last?.tail } }

    /// A writer of this handle begins (the caller holds the gate): true
    /// when the group holds the writer lock already, false when the caller
    /// must take it (and then call ``lockTaken()``).
    func writerBegins() -> Bool {
        condition.withLock {
            writerInside = true
            return lockHeld
        }
    }

    /// The caller took the writer lock for this handle.
    func lockTaken() {
        condition.withLock { lockHeld = true }
    }

    /// The writer left without appending (a rollback, an empty or failed
    /// commit): the writer lock is released unless commits are pending.
    /// The caller holds the gate.
    func writerLeaves() {
        condition.withLock {
            writerInside = false
            releaseIfIdle()
        }
    }

    /// Appends a commit to the queue (the caller holds the gate, and wrote
    /// its frames after ``tail``, or will write them: `entry.written`);
    /// returns its ticket. `after` is the ticket of the pending commit its
    /// transaction continued from (``continuation()``), 0 for none. Throws
    /// the error of a sync or a write that failed meanwhile: the frames
    /// come after commits that will never be published.
    func enqueue(_ entry: Entry, after: UInt64) throws -> UInt64 {
        try condition.withLock {
            if let failure { throw failure.error }
            if let writeFailure { throw writeFailure.error }
            if after > published.load(ordering: .relaxed), !entries.contains(where: { $0.ticket == after }) {
                // It continued from a commit a write failure took away.
                throw lastWriteError ?? StorageError.transactionFailed("an earlier commit's log write failed")
            }
            var entry = entry
            entry.ticket = nextTicket
            nextTicket += 1
            entries.append(entry)
            writerInside = false
            return entry.ticket
        }
    }

    /// Releases the shared index's writer lock once the group is done
    /// with it (the caller holds `condition`).
    private func releaseIfIdle() {
        if lockHeld && entries.isEmpty && !writerInside && !syncing {
            wal.shared.unlock(SharedIndex.writerLock)
            lockHeld = false
        }
    }

    /// Waits until nothing is pending and no leader is at work (the caller
    /// holds the gate, so nothing new is appended meanwhile).
    func waitUntilIdle() {
        condition.withLock {
            idleWaiters += 1
            while !entries.isEmpty || syncing { condition.wait() }
            idleWaiters -= 1
        }
    }

    /// Returns once `ticket` is published; throws the sync's error when it
    /// failed, for this commit and every other one waiting on that sync.
    /// The caller leads a sync when none runs: it syncs the log, then
    /// publishes the batch it covered, in order, under the writer lock the
    /// group holds; a failed sync poisons the handle instead.
    func awaitPublished(_ ticket: UInt64) throws {
        while published.load(ordering: .acquiring) < ticket || failedCount.load(ordering: .acquiring) > 0 {
            condition.lock()
            if let error = failedTickets.removeValue(forKey: ticket) {
                failedCount.wrappingSubtract(1, ordering: .releasing)
                condition.unlock()
                throw error
            }
            if ticket <= published.load(ordering: .relaxed) {
                condition.unlock()
                return
            }
            if let failure, ticket <= failure.through {
                condition.unlock()
                throw failure.error
            }
            if let open = writeFailure, ticket >= open.from {
                // Failed: it learns so when the failure closes, which
                // wakes every waiter.
                let ends = syncEnds[syncNumber % 2]
                let key = ends.key
                condition.unlock()
                ends.wait(unless: key)
                continue
            }
            if syncing {
                // Covered by the running sync, or by the next one.
                let ends = syncEnds[(syncNumber + (ticket > syncingThrough ? 1 : 0)) % 2]
                let key = ends.key
                condition.unlock()
                ends.wait(unless: key)
                continue
            }
            // Lead: sync everything appended so far, once its frames are
            // written (their threads write them after the gate), up to a
            // failed write.
            syncing = true
            syncNumber += 1
            syncingThrough = entries.last?.ticket ?? published.load(ordering: .relaxed)
            func good(_ entry: Entry) -> Bool {
                entry.ticket <= syncingThrough && entry.ticket < writeFailure?.from ?? .max
            }
            while entries.contains(where: { good($0) && !$0.written }) {
                leaderWaitsForWrites = true
                condition.wait()
            }
            leaderWaitsForWrites = false
            let batch = Array(entries.prefix(while: good))
            condition.unlock()
            var syncError: (any Error)?
            do { try syncLog() } catch { syncError = error }
            if let syncError {
                poison("an fsync of the WAL failed: \(syncError)")
            } else {
                for entry in batch {
                    publish(
                        pages: entry.pages, firstFrame: entry.first, spilled: entry.spilled, tail: entry.tail,
                        header: entry.header, mainChanged: entry.mainChanged)
                }
            }
            condition.lock()
            if let syncError {
                // Nothing appended can be trusted any more: every pending
                // commit fails, and the handle refuses writes.
                failure = (nextTicket - 1, syncError)
                // Commits whose threads still write their frames leave
                // the queue once they have (``wrote(_:error:)``).
                entries.removeAll { $0.written }
            } else {
                entries.removeFirst(batch.count)
                if let last = batch.last { published.store(last.ticket, ordering: .releasing) }
            }
            syncing = false
            releaseIfIdle()
            let ended = syncEnds[syncNumber % 2]
            let next = syncEnds[(syncNumber + 1) % 2]
            let wakeNext: Bool? = syncError != nil ? true : entries.isEmpty ? nil : false
            if idleWaiters > 0 { condition.broadcast() }
            condition.unlock()
            // The commits this sync covered return; one of those appended
            // meanwhile leads the next sync (it wakes the rest when done).
            // A failure wakes everyone.
            ended.notify(all: true)
            if let wakeNext { next.notify(all: wakeNext) }
        }
    }

    /// The thread of commit `ticket` wrote its frames after releasing the
    /// gate, or failed to (`error`): that commit and every later pending
    /// one then fail (see `writeFailure`). Every commit whose write was
    /// deferred reports here once, before it waits for its sync.
    func wrote(_ ticket: UInt64, error: (any Error)?) {
        let changed: Bool = condition.withLock {
            guard let i = entries.firstIndex(where: { $0.ticket == ticket }) else { return false }
            if failure != nil {
                // A sync failed meanwhile: the commit is failed already,
                // and leaves the queue now that its write is over.
                entries.remove(at: i)
                releaseIfIdle()
                if idleWaiters > 0 { condition.broadcast() }
                return false
            }
            entries[i].written = true
            var changed = false
            if let error, ticket < writeFailure?.from ?? .max {
                writeFailure = (ticket, error)
                lastWriteError = error
                changed = true
            }
            if let open = writeFailure, !entries.contains(where: { $0.ticket >= open.from && !$0.written }) {
                // Every commit after the hole has finished writing: they
                // leave the queue, and the next writer appends after the
                // commits before it.
                for entry in entries where entry.ticket >= open.from { failedTickets[entry.ticket] = open.error }
                failedCount.store(failedTickets.count, ordering: .releasing)
                entries.removeAll { $0.ticket >= open.from }
                writeFailure = nil
                catalog.reset()
                releaseIfIdle()
                if idleWaiters > 0 { condition.broadcast() }
                changed = true
            }
            if leaderWaitsForWrites { condition.broadcast() }
            return changed
        }
        // Waiters look again: the failed ones throw, the others may lead.
        if changed {
            syncEnds[0].notify(all: true)
            syncEnds[1].notify(all: true)
        }
    }

    /// The leader's sync of the log (`fdatasync`, through the file).
    private func syncLog() throws {
        try stateLock.withLock { wal.file }.sync()
        stateLock.withLock { logSyncs += 1 }
    }

    /// Makes a written (and, as the durability level requires, synced)
    /// commit visible to every handle: publishes its frames in the shared
    /// index and caches its pages. `mainChanged`: the commit also wrote
    /// pages into the main file (it spilled). `firstFrame` is the commit's
    /// first frame: its spilled frames (`spilled`, page numbers), then
    /// `pages`. Called by the group's leader, and by a commit of
    /// durability below `full` under the gate.
    func publish(
        pages: [(number: UInt32, page: Page)], firstFrame: Int, spilled: [UInt32], tail: WAL.LogTail,
        header: FileHeader, mainChanged: Bool
    ) {
        _ = wal.publish(
            pages, first: firstFrame, spilled: spilled, chain: tail.chain, header: header, mainChanged: mainChanged
        ) { state in
            let firstPage = firstFrame + spilled.count
            for (i, entry) in pages.enumerated() {
                pager.cache.put(PageCache.frameKey(generation: state.generation, frame: firstPage + i), entry.page)
            }
            commits += 1
        }
    }

    /// After an fsync failure nothing the OS says about durability can be
    /// trusted: the handle stops writing (reopening runs recovery), and
    /// the catalog cache remembers nothing more (positions past the
    /// published state may be reused by other processes' commits).
    func poison(_ why: String) {
        stateLock.withLock { if poisoned == nil { poisoned = why } }
        catalog.forget()
    }
}
