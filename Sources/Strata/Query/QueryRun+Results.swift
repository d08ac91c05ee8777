import Foundation
import StrataEngine

/// A query's results: models made from the rows it found, and the
/// relationships it prefetches for them.
extension QueryRun {
    /// The matching rows in result order, paged, with their models when
    /// `materialize` is true; pending models that match are merged in.
    func results(materialize: Bool) throws -> (rows: [Int64], models: [T]) {
        let offset = max(descriptor.fetchOffset ?? 0, 0)
        let limit = descriptor.limit.map { max($0, 0) }
        let pending = try pendingMatches()
        var order = plan.order
        if case .index = order, !pending.isEmpty { order = keysOrder() }
        var rows: [Int64] = []
        var models: [T] = []
        switch order {
        case .none, .index:
            var seen = 0
            let wanted = limit.map { offset + $0 }
            // Collected as existentials: appending to `[T]` in this generic
            // code would look up `Array<T>`'s metadata for every row.
            var found: [any PersistentModel] = []
            if wanted != 0 {
                try forEachMatch(registeredWithoutRecord: materialize) { row, record in
                    seen += 1
                    if seen > offset {
                        rows.append(row)
                        if materialize {
                            found.append(
                                try context.registered(entity, row: row)
                                    ?? context.materialize(entity: entity, row: row, bytes: record, skipping: skipping))
                        }
                    }
                    return wanted.map { seen < $0 } ?? true
                }
            }
            models = downcast(found, to: T.self)
            if wanted.map({ seen < $0 }) ?? true {
                for model in pending {
                    seen += 1
                    guard seen > offset, wanted.map({ seen <= $0 }) ?? true else { continue }
                    rows.append(model._strataState.rowID)
                    if materialize { models.append(model) }
                }
            }
        case .keys(let keys):
            var entries: [(keys: [QueryValue], row: Int64)] = []
            try forEachMatch { row, record in
                entries.append((try keys.map { try evaluator.rootValue($0.property, row: row, record: record) }, row))
                return true
            }
            var pendingByRow: [Int64: T] = [:]
            for model in pending {
                entries.append((try keys.map { try evaluator.rootValue($0.property, model: model) }, model._strataState.rowID))
                pendingByRow[model._strataState.rowID] = model
            }
            rows = QuerySort.sorted(entries, keys: keys, offset: offset, limit: limit)
            if materialize {
                for row in rows {
                    if let model = try pendingByRow[row] ?? model(row: row) { models.append(model) }
                }
            }
        case .models:
            var all: [T] = []
            try forEachMatch { row, record in
                all.append(try model(row: row, record: record))
                return true
            }
            all += pending
            all.sort(by: Self.order(descriptor.sortBy, entity: entity))
            let start = min(offset, all.count)
            let end = limit.map { min(start + $0, all.count) } ?? all.count
            models = Array(all[start..<end])
            rows = models.map { $0._strataState.rowID }
        }
        if materialize { try prefetch(models) }
        return (rows, models)
    }

    /// The order `sortBy` gives models of `entity`, ties in row order.
    ///
    /// Stored floating-point attributes sort in totalOrder here too, as
    /// they do by keys and through an index (`SortDescriptor` would use
    /// `<`, leaving NaN unordered); the rest sort through the descriptor.
    static func order(_ sortBy: [SortDescriptor<T>], entity: Schema.Entity) -> (T, T) -> Bool {
        let floating = sortBy.map { sort in
            sort.keyPath.flatMap { path in
                entity.attribute(at: path).flatMap { QuerySort.sortsInTotalOrder($0) ? $0 : nil }
            }
        }
        return { a, b in
            for (sort, property) in zip(sortBy, floating) {
                var result: ComparisonResult
                if let property {
                    result = QuerySort.compare(
                        .make(a[keyPath: property.keypath] as Any), .make(b[keyPath: property.keypath] as Any), nil)
                    if sort.order == .reverse { result = QuerySort.reversed(result) }
                } else {
                    result = sort.compare(a, b)
                }
                switch result {
                case .orderedAscending: return true
                case .orderedDescending: return false
                case .orderedSame: continue
                }
            }
            return a._strataState.rowID < b._strataState.rowID
        }
    }

    // MARK: Prefetching

    /// Loads the targets of the relationships `relationshipKeyPathsForPrefetching`
    /// names, for every model in `models`, in this run's read transaction:
    /// they are registered in the context, and a to-many's list of rows is
    /// read too, so reading the relationship later reads nothing from the
    /// store.
    private func prefetch(_ models: [T]) throws {
        let paths = descriptor.relationshipKeyPathsForPrefetching
        guard !paths.isEmpty, !models.isEmpty else { return }
        let schema = context.container.schema
        for path in paths {
            guard let relationship = entity.relationship(at: path),
                let type = relationship.destinationType, let target = schema.entity(forType: type),
                let records = try snapshot.tree(target.recordTree)
            else { continue }
            let field = relationship.field
            for model in models {
                let state = model._strataState
                guard state.status == .saved, let fault = state.faults[field] else { continue }
                let rows: [Int64]
                switch fault {
                case .rows(let listed): rows = listed
                case .derived(let tree, let row):
                    // The list is read now, in this transaction: the
                    // relationship is then as loaded as one already read
                    // (a save of another context that changes it refreshes
                    // it the same way), and reading it reads nothing more.
                    rows = try snapshot.pairs(tree, of: row)
                    state.setFault(field: field, rows: rows)
                case .external: continue
                }
                for row in rows where context.registered(target, row: row) == nil {
                    _ = try snapshot.tx.withValue(for: RowKey.encode(row), in: records) { bytes in
                        try context.materialize(entity: target, row: row, bytes: bytes)
                    }
                }
            }
        }
    }

    private func keysOrder() -> QueryPlan.Order {
        guard case .index = plan.order, case .index(let scan) = plan.access,
            let sort = descriptor.sortBy.first
        else { return .models }
        let property = scan.group.properties[scan.boundColumns]
        return .keys([QueryPlan.SortKey(property: property, reverse: sort.order == .reverse, stringComparator: nil)])
    }
}
