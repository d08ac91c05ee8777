import Foundation
import Synchronization
import XCTest

@testable import StrataEngine

/// The engine's own waiting primitives: the writer gate and the event
/// count the group commit's waiters sleep on. A broken one shows as two
/// threads inside the gate at once, or as a thread that sleeps for ever
/// (caught here by a deadline).
final class LockTests: XCTestCase {
    /// Runs `body(i)` on `threads` threads and waits up to `seconds` for
    /// all of them; fails the test when one is still running then.
    func onThreads(_ threads: Int, seconds: Double = 60, _ body: @escaping @Sendable (Int) -> Void) {
        let done = DispatchGroup()
        for i in 0..<threads {
            done.enter()
            Thread {
                body(i)
                done.leave()
            }.start()
        }
        XCTAssertEqual(done.wait(timeout: .now() + seconds), .success, "a thread was still waiting after \(seconds) s")
    }

    func testTheWriterGateLetsOneThreadInAtATime() {
        let gate = WriterGate()
        let inside = Atomic<Int>(0)
        let overlaps = Atomic<Int>(0)
        let notHolder = Atomic<Int>(0)
        final class Box: @unchecked Sendable { var count = 0 }  // guarded by gate
        let box = Box()
        let rounds = 3_000
        onThreads(8) { _ in
            for round in 0..<rounds {
                if gate.isHeldByCurrentThread { notHolder.add(1, ordering: .relaxed) }
                gate.acquire()
                if inside.add(1, ordering: .relaxed).newValue != 1 { overlaps.add(1, ordering: .relaxed) }
                if !gate.isHeldByCurrentThread { notHolder.add(1, ordering: .relaxed) }
                box.count += 1
                // Now and then stay long enough for the others to queue
                // and sleep, so that releases hand the gate over.
                if round % 64 == 0 { usleep(50) }
                inside.subtract(1, ordering: .relaxed)
                gate.release()
            }
        }
        XCTAssertEqual(overlaps.load(ordering: .relaxed), 0, "threads inside the gate together")
        XCTAssertEqual(notHolder.load(ordering: .relaxed), 0, "isHeldByCurrentThread was wrong")
        XCTAssertEqual(box.count, 8 * rounds)
        XCTAssertFalse(gate.isHeldByCurrentThread)
    }

    /// A notification between reading the key and waiting is not lost:
    /// the wait returns at once, whether the notification came from this
    /// thread or from another that is gone by then.
    func testAnEventCountWaitAfterANotificationReturnsAtOnce() {
        let events = EventCount()
        onThreads(1, seconds: 10) { _ in
            let key = events.key
            events.notify(all: true)
            events.wait(unless: key)
            let next = events.key
            let other = Thread { events.notify(all: false) }
            other.start()
            while events.key == next { usleep(100) }
            events.wait(unless: next)
        }
    }

    /// Two threads take turns through a counter guarded by a lock, each
    /// sleeping on the event count until it is its turn: a lost wake-up
    /// stops both.
    func testAnEventCountLosesNoWakeUp() {
        let lock = Lock()
        let events = EventCount()
        final class Box: @unchecked Sendable { var turn = 0 }  // guarded by lock
        let box = Box()
        let rounds = 20_000
        onThreads(2) { me in
            for _ in 0..<rounds {
                while true {
                    let (mine, key): (Bool, UInt32) = lock.withLock { (box.turn % 2 == me, events.key) }
                    if mine { break }
                    events.wait(unless: key)
                }
                lock.withLock { box.turn += 1 }
                events.notify(all: true)
            }
        }
        XCTAssertEqual(lock.withLock { box.turn }, 2 * rounds)
    }

    /// Waking one waiter at a time: every ticket handed out is taken, and
    /// every waiter gets its share, however the wake-ups race with threads
    /// about to sleep.
    func testAnEventCountWakingOneAtATimeServesEveryWaiter() {
        let lock = Lock()
        let events = EventCount()
        final class Box: @unchecked Sendable {
            var tickets = 0  // guarded by lock
            var taken = 0  // guarded by lock
        }
        let box = Box()
        let waiters = 4
        let each = 2_000
        let served = DispatchGroup()
        for _ in 0..<waiters {
            served.enter()
            Thread {
                var got = 0
                while got < each {
                    let key: UInt32? = lock.withLock {
                        guard box.tickets > 0 else { return events.key }
                        box.tickets -= 1
                        box.taken += 1
                        return nil
                    }
                    if let key { events.wait(unless: key) } else { got += 1 }
                }
                served.leave()
            }.start()
        }
        for i in 0..<(waiters * each) {
            lock.withLock { box.tickets += 1 }
            events.notify(all: false)
            // Now and then let every waiter fall asleep.
            if i % 64 == 0 { usleep(200) }
        }
        XCTAssertEqual(served.wait(timeout: .now() + 60), .success, "a waiter slept through its ticket")
        XCTAssertEqual(lock.withLock { box.taken }, waiters * each)
    }

    #if os(Linux)
        /// A notification makes its wake call only when a thread may be
        /// asleep: none while nobody waits, one for a waiter that went to
        /// sleep, and none again once that waiter was woken.
        func testAnEventCountWakesOnlyWhenAThreadMaySleep() {
            let events = EventCount()
            for _ in 0..<100 {
                events.notify(all: true)
                events.notify(all: false)
            }
            XCTAssertEqual(events.wakes, 0)
            let key = events.key
            let woke = DispatchGroup()
            woke.enter()
            Thread {
                events.wait(unless: key)
                woke.leave()
            }.start()
            let deadline = Date().addingTimeInterval(10)
            while !events.mayHaveSleepers && Date() < deadline { usleep(100) }
            XCTAssertTrue(events.mayHaveSleepers, "the waiter never marked the word")
            events.notify(all: true)
            XCTAssertEqual(woke.wait(timeout: .now() + 10), .success, "the waiter slept through the notification")
            XCTAssertEqual(events.wakes, 1)
            XCTAssertFalse(events.mayHaveSleepers)
            events.notify(all: true)
            XCTAssertEqual(events.wakes, 1)
        }

        /// A lone writer's durable commits lead their own syncs, and the
        /// end of each sync, which nobody waits for, makes no wake call
        /// (it made one a commit).
        func testLoneDurableCommitsMakeNoWakeCall() throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lock-tests-\(UUID())")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let db = try Database.open(
                path: directory.appendingPathComponent("lone.strata").path, options: DatabaseOptions(durability: .full))
            defer { try? db.close() }
            for i in 0..<50 {
                try db.write { tx in
                    let tree = try tx.treeIfPresent("t") ?? tx.createTree("t")
                    try tx.put([UInt8(i)], [1, 2, 3], in: tree)
                }
            }
            XCTAssertEqual(try db.read { tx in try tx.count(tx.tree("t")) }, 50)
            XCTAssertEqual(db.groupCommit.syncWakes, 0)
        }
    #endif
}
