import Foundation
import StrataTesting
import XCTest

@testable import Strata

/// `willSave` and `didSave` go through one gate per process on Linux (see
/// `SaveNotifications`): it must never turn an observer that waits for
/// another thread's save into a deadlock.
final class SaveNotificationTests: StoreTestCase {
    /// A `didSave` observer that blocks until another thread's save has
    /// returned, while that save's own posts need the gate the observer's
    /// post holds: the other save waits out the gate's patience and goes
    /// on, and both return.
    func testAnObserverWaitingForAnotherThreadsSaveDoesNotDeadlock() throws {
        let container = try container(for: [Trip.self])
        let first = ModelContext(container)
        nonisolated(unsafe) let second = ModelContext(container)
        let secondSaved = DispatchSemaphore(value: 0)
        let failures = EventLog()
        let observer = NotificationCenter.default.addObserver(forName: ModelContext.didSave, object: first, queue: nil) {
            _ in
            // Save the second context on another thread, and wait for it.
            Thread.detachNewThread {
                second.insert(Trip(name: "B", destination: "Y"))
                do { try second.save() } catch { failures.append("\(error)") }
                secondSaved.signal()
            }
            if secondSaved.wait(timeout: .now() + 30) == .timedOut { failures.append("the second save never returned") }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        first.insert(Trip(name: "A", destination: "X"))
        try first.save()
        XCTAssertEqual(failures.events, [])
        XCTAssertEqual(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()), 2)
    }

    /// An observer that saves on its own thread posts at once: the gate
    /// is its thread's already.
    func testAnObserverSavingOnItsOwnThreadPostsToo() throws {
        let container = try container(for: [Trip.self])
        let first = ModelContext(container)
        nonisolated(unsafe) let second = ModelContext(container)
        let log = EventLog()
        let center = NotificationCenter.default
        let observers = [
            center.addObserver(forName: ModelContext.didSave, object: first, queue: nil) { _ in
                log.append("first")
                second.insert(Trip(name: "B", destination: "Y"))
                do { try second.save() } catch { log.append("\(error)") }
            },
            center.addObserver(forName: ModelContext.didSave, object: second, queue: nil) { _ in log.append("second") },
        ]
        defer { observers.forEach(center.removeObserver) }
        first.insert(Trip(name: "A", destination: "X"))
        try first.save()
        XCTAssertEqual(log.events, ["first", "second"])
    }

    #if os(Linux)
        /// The gate is recursive, and another thread gives up on it after
        /// its patience instead of waiting for good.
        func testTheGateIsRecursiveAndOthersWaitOnlySoLong() {
            let gate = SaveNotifications.Gate()
            XCTAssertTrue(gate.take(within: .zero))
            XCTAssertTrue(gate.take(within: .zero), "the holder takes it again")
            let other = DispatchSemaphore(value: 0)
            let tookIt = EventLog()
            Thread.detachNewThread {
                tookIt.append("\(gate.take(within: .milliseconds(20)))")
                other.signal()
            }
            XCTAssertEqual(other.wait(timeout: .now() + 30), .success)
            XCTAssertEqual(tookIt.events, ["false"])
            gate.release()
            gate.release()
            Thread.detachNewThread {
                tookIt.append("\(gate.take(within: .milliseconds(20)))")
                gate.release()
                other.signal()
            }
            XCTAssertEqual(other.wait(timeout: .now() + 30), .success)
            XCTAssertEqual(tookIt.events, ["false", "true"])
        }
    #endif
}
