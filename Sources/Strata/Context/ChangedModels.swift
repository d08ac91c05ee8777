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
struct ChangedModels {
    /// The models in the order they joined; nil where one was removed.
    private var order: [(any PersistentModel)?] = []
    /// How many models `order` holds.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }
    var capacity: Int { order.capacity }

    /// Where `model` is in `order`, or nil when it is not held.
    private func position(of model: some PersistentModel) -> Int? {
        let slot = model._strataState.changedSlot
        guard slot >= 0, slot < order.count, let held = order[slot], held === model else { return nil }
        return slot
    }

    /// True when `model` is held.
    func contains(_ model: some PersistentModel) -> Bool { position(of: model) != nil }

    /// Adds `model` at the end, unless it is held already.
    mutating func insert(_ model: some PersistentModel) {
        guard position(of: model) == nil else { return }
        model._strataState.changedSlot = order.count
        order.append(model)
        count += 1
    }

    /// Removes `model`; returns it, or nil when it was not held.
    @discardableResult mutating func remove(_ model: some PersistentModel) -> (any PersistentModel)? {
        guard let at = position(of: model) else { return nil }
        let removed = order[at]
        order[at] = nil
        count -= 1
        model._strataState.changedSlot = -1
        if order.count > 32, order.count > 2 * count { squeeze() }
        return removed
    }

    mutating func removeAll(keepingCapacity: Bool = false) {
        order.removeAll(keepingCapacity: keepingCapacity)
        count = 0
    }

    /// Drops the holes, keeping the order.
    private mutating func squeeze() {
        var kept: [(any PersistentModel)?] = []
        kept.reserveCapacity(count)
        for case let model? in order {
            model._strataState.changedSlot = kept.count
            kept.append(model)
        }
        order = kept
    }

    /// The models, in the order they joined.
    var values: Values { Values(order: order, count: count) }

    /// The models of a ``ChangedModels``, in the order they joined.
    struct Values: Sequence {
        fileprivate let order: [(any PersistentModel)?]
        let count: Int

        var underestimatedCount: Int { count }

        func makeIterator() -> Iterator { Iterator(order: order) }

        struct Iterator: IteratorProtocol {
            fileprivate let order: [(any PersistentModel)?]
            fileprivate var position = 0

            mutating func next() -> (any PersistentModel)? {
                while position < order.count {
                    defer { position += 1 }
                    if let model = order[position] { return model }
                }
                return nil
            }
        }
    }
}
