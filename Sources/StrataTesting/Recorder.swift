import StrataEngine

/// Values a background task records (a live sequence's, mapped to
/// something `Sendable`), for tests that wait for them.
public final class Recorder<Value: Sendable>: @unchecked Sendable {
    private let lock = Lock()
    private var values: [Value] = []  // guarded by lock
    private var ending: (error: (any Error)?, ended: Bool) = (nil, false)  // guarded by lock

    /// A recorder with no values.
    public init() {}

    /// Records one value.
    public func record(_ value: Value) { lock.withLock { values.append(value) } }

    /// Records the end of the values, with the error that ended them.
    public func finish(_ error: (any Error)? = nil) { lock.withLock { ending = (error, true) } }

    /// The values so far.
    public var recorded: [Value] { lock.withLock { values } }

    /// True once ``finish(_:)`` was called.
    public var ended: Bool { lock.withLock { ending.ended } }

    /// The error the values ended with, if any.
    public var error: (any Error)? { lock.withLock { ending.error } }

    /// Waits until `condition` holds of the values so far (true) or
    /// `timeout` passes (false), looking every millisecond.
    public func wait(timeout: Duration = .seconds(30), until condition: ([Value]) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if condition(recorded) { return true }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return condition(recorded)
    }

    /// Waits until `count` values are recorded (true) or `timeout` passes.
    public func wait(forCount count: Int, timeout: Duration = .seconds(30)) async -> Bool {
        await wait(timeout: timeout) { $0.count >= count }
    }

    /// Waits for ``finish(_:)`` (true) or until `timeout` passes.
    public func waitForEnd(timeout: Duration = .seconds(30)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if ended { return true }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return ended
    }
}
