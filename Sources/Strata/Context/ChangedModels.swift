// The saved models a context changed, by identity, in the order they
// were first changed.

/// A context's changed models, a set by identity that keeps the order in
/// which the models joined it.
///
/// A save passes over its changed models several times (checks, row
/// order, unique keys, writes, the reset after the commit). A `Dictionary`
/// hands them out in hash order, so with ten thousand changed models each
/// pass missed the cache on nearly every model and its state. Apps change
/// models in the order they fetched them, which is row order and, mostly,
/// the order of their allocation: passes in that order walk memory
/// forwards, and the save finds the rows already sorted.
///
/// A removed model leaves a hole in the order; holes are squeezed out once
/// they outnumber the models.
///
/// Each model's state keeps its position (`_ModelState.changedSlot`), so
/// that noting a change needs no hash table: a dictionary by identity cost
/// about 600 instructions a model changed, half of a property setter's
/// instructions. A model is held by at most one live context's changes (a model
/// joins another context only once its own is gone), and a position is
/// trusted only where this list holds that very model: a stale one (left
/// by a context that is gone, or by ``removeAll(keepingCapacity:)``) reads
/// as not held.
///
/// Each model is held with its state: the passes of a save read the state
/// of every model, and asking a model for it (a protocol witness that
/// returns it retained, then a release) cost about 50 instructions a time,
/// about nine times a fetched, changed and saved model.
struct ChangedModels {
    /// A held model and its state (`model._strataState`).
    struct Entry {
        let model: any PersistentModel
        let state: _ModelState
    }

    /// The models in the order they joined; nil where one was removed.
    private var order: [Entry?] = []
    /// How many models `order` holds.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }
    var capacity: Int { order.capacity }

    /// Where `model` is in `order`, or nil when it is not held.
    private func position(of model: some PersistentModel, state: _ModelState) -> Int? {
        let slot = state.changedSlot
        guard slot >= 0, slot < order.count, let held = order[slot], held.model === model else { return nil }
        return slot
    }

    /// True when `model` is held.
    func contains(_ model: some PersistentModel) -> Bool { position(of: model, state: model._strataState) != nil }

    /// Adds `model`, whose state is `state`, at the end, unless it is held
    /// already.
    mutating func insert(_ model: some PersistentModel, state: _ModelState) {
        guard position(of: model, state: state) == nil else { return }
        state.changedSlot = order.count
        order.append(Entry(model: model, state: state))
        count += 1
    }

    /// Adds `model` at the end, unless it is held already.
    mutating func insert(_ model: some PersistentModel) { insert(model, state: model._strataState) }

    /// Removes `model`; returns it, or nil when it was not held.
    @discardableResult mutating func remove(_ model: some PersistentModel) -> (any PersistentModel)? {
        let state = model._strataState
        guard let at = position(of: model, state: state) else { return nil }
        let removed = order[at]?.model
        order[at] = nil
        count -= 1
        state.changedSlot = -1
        if order.count > 32, order.count > 2 * count { squeeze() }
        return removed
    }

    mutating func removeAll(keepingCapacity: Bool = false) {
        order.removeAll(keepingCapacity: keepingCapacity)
        count = 0
    }

    /// Drops the holes, keeping the order.
    private mutating func squeeze() {
        var kept: [Entry?] = []
        kept.reserveCapacity(count)
        for case let entry? in order {
            entry.state.changedSlot = kept.count
            kept.append(entry)
        }
        order = kept
    }

    /// The models, in the order they joined.
    var values: LazyMapSequence<Entries, any PersistentModel> { entries.lazy.map(\.model) }

    /// The models with their states, in the order they joined.
    var entries: Entries { Entries(order: order, count: count) }

    /// The entries of a ``ChangedModels``, in the order they joined.
    struct Entries: Sequence {
        fileprivate let order: [Entry?]
        let count: Int

        var underestimatedCount: Int { count }

        func makeIterator() -> Iterator { Iterator(order: order) }

        struct Iterator: IteratorProtocol {
            fileprivate let order: [Entry?]
            fileprivate var position = 0

            mutating func next() -> Entry? {
                while position < order.count {
                    defer { position += 1 }
                    if let entry = order[position] { return entry }
                }
                return nil
            }
        }
    }
}
