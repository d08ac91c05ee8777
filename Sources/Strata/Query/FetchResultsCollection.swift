import Foundation
import StrataEngine

/// The result of ``ModelContext/fetch(_:batchSize:)``: the models a fetch
/// found, by position, built a batch at a time from the fetch's snapshot.
///
/// SwiftData builds these models a batch at a time too, and traps when a
/// model cannot be read. Strata checks at the fetch that every record
/// decodes, and reads the fetch's own snapshot afterwards, so a later save
/// (even one that deletes a row) cannot take a model away. What remains is
/// a read failing for a page that read fine at the fetch (a disk error):
/// the model is then loaded from the store as it is now, and if that fails
/// too, the position holds a stand-in instead of trapping: a model in no
/// context that reads `isDeleted`, whose values are those of the first
/// match, not the row's. ``readFailure`` then holds the error.
public final class FetchResultsCollection<Element>: RandomAccessCollection {
    private enum Source {
        case models([Element])
        case rows(Batched)
    }

    /// The state of a batched collection. Read on the context's thread.
    private final class Batched {
        let context: ModelContext
        let entity: Schema.Entity
        let rows: [Int64]
        let snapshot: ModelContext.Snapshot
        let batchSize: Int
        var batchStart = -1
        var batch: [Element] = []
        var previousRows: ArraySlice<Int64> = []
        /// Returned for a row that cannot be read any more.
        let standIn: Element?
        /// Why the last row that could not be read failed.
        var failure: (any Error)?
        /// Test hook: reads of these rows fail as a disk error would.
        var unreadable: Set<Int64> = []

        init(
            context: ModelContext, entity: Schema.Entity, rows: [Int64], snapshot: ModelContext.Snapshot, batchSize: Int,
            standIn: Element?
        ) {
            (self.context, self.entity, self.rows, self.snapshot, self.batchSize, self.standIn) =
                (context, entity, rows, snapshot, batchSize, standIn)
        }

        deinit { snapshot.tx.end() }

        func model(at position: Int) -> Element {
            let start = position - position % batchSize
            if start != batchStart {
                let previous = batch
                batch = []
                if batchStart >= 0 {
                    // The batch before the previous one: its models the app
                    // did not keep are gone by now.
                    context.pruneReleased(entity, rows: previousRows)
                    previousRows = rows[batchStart..<Swift.min(batchStart + batchSize, rows.count)]
                }
                batchStart = start
                for case let model as any PersistentModel in previous { context.release(model, entity: entity) }
                let slice = rows[start..<Swift.min(start + batchSize, rows.count)]
                if unreadable.isDisjoint(with: slice),
                    let models = try? context.batchModels(entity, rows: slice, snapshot: snapshot) as? [Element]
                {
                    batch = models
                } else {
                    batch = slice.compactMap(load)
                }
            }
            return batch[position - start]
        }

        /// One model, when its batch could not be read as a whole: read
        /// alone, or loaded from the store as it is now, or the stand-in.
        /// Nil only without a stand-in, which a collection with rows has.
        private func load(_ row: Int64) -> Element? {
            let failure: any Error
            do {
                guard !unreadable.contains(row) else {
                    throw SwiftDataError(.corruptRecord, "\(entity.name) row \(row): unreadable (test hook)")
                }
                if let model = try context.batchModels(entity, rows: [row], snapshot: snapshot).first as? Element {
                    return model
                }
                throw SwiftDataError(.corruptRecord, "\(entity.name) row \(row) is not a \(Element.self)")
            } catch {
                failure = error
            }
            let id = PersistentIdentifier(storeIdentifier: context.store.identifier, entityName: entity.name, rowID: row)
            if !unreadable.contains(row), let model = (try? context.existingAny(for: id)) as? Element { return model }
            self.failure = failure
            return standIn
        }
    }

    private let source: Source

    init(models: [Element]) {
        source = .models(models)
    }

    init(
        context: ModelContext, entity: Schema.Entity, rows: [Int64], snapshot: ModelContext.Snapshot, batchSize: Int,
        standIn: Element?
    ) {
        source = .rows(
            Batched(
                context: context, entity: entity, rows: rows, snapshot: snapshot, batchSize: batchSize, standIn: standIn))
    }

    /// The error of the last row this collection could not read after its
    /// fetch (a disk error), whose position then held a stand-in; nil
    /// while every read succeeded. A Strata addition.
    public var readFailure: (any Error)? {
        guard case .rows(let batched) = source else { return nil }
        return batched.failure
    }

    /// Test hook: reads of `rows` fail from now on, as after a disk error.
    func failReads(of rows: Set<Int64>) {
        guard case .rows(let batched) = source else { return }
        batched.unreadable = rows
    }

    /// The position of the first model: 0.
    public var startIndex: Int { 0 }

    /// The number of models: the position after the last one.
    public var endIndex: Int {
        switch source {
        case .models(let models): return models.count
        case .rows(let batched): return batched.rows.count
        }
    }

    /// The model at `position`; a position out of range traps, as an
    /// array's does.
    public subscript(position: Int) -> Element {
        switch source {
        case .models(let models): return models[position]
        case .rows(let batched):
            precondition(position >= 0 && position < batched.rows.count, "index out of range")
            return batched.model(at: position)
        }
    }
}
