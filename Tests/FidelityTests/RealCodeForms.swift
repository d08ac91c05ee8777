// The forms a census of public SwiftData data layers found in at least 1%
// of files (Tests/Census/realcode-counts.md) that the other fidelity files
// do not already use: a to-do app's data layer, written for this project.
import Foundation
import Observation
import Strata

@Model
final class Chore: Identifiable, Hashable {
    // An own `id`, which Identifiable then uses instead of persistentModelID.
    @Attribute(.unique) var id: UUID = UUID()
    @Attribute(originalName: "title") var name: String
    var dueDate: Date?
    var priority = Priority.normal
    var notes = ""
    var estimate: Double = 0.5
    @Attribute(.externalStorage) var photo: Data?
    var checksum = Data()
    @Relationship var steps: [ChoreStep] = []
    var room: Room?

    enum Priority: Int, Codable, Comparable {
        case low, normal, high
        static func < (a: Priority, b: Priority) -> Bool { a.rawValue < b.rawValue }
    }

    /// Not stored: computed from the stored due date.
    @Transient var isOverdue: Bool {
        guard let dueDate else { return false }
        return dueDate < Date.now
    }

    init() {
        self.name = "Untitled"
    }

    init(name: String, dueDate: Date? = nil, priority: Priority = .normal) {
        self.name = name
        self.dueDate = dueDate
        self.priority = priority
    }

    convenience init(name: String, inDays days: Int) {
        self.init(name: name, dueDate: Calendar.current.date(byAdding: .day, value: days, to: .now))
    }

    static func sample() -> [Chore] {
        [Chore(name: "Dishes", inDays: 0), Chore(name: "Laundry", inDays: 2)]
    }
}

extension Chore {
    var stepCount: Int { steps.count }

    func complete() {
        for step in steps { step.isDone = true }
    }

    static var urgent: Predicate<Chore> {
        let high = Priority.high.rawValue
        return #Predicate<Chore> { chore in chore.priority.rawValue == high }
    }
}

@Model
class ChoreStep {
    var text: String
    var isDone = false
    @Relationship(inverse: \Chore.steps) var chore: Chore?

    required init(text: String) {
        self.text = text
    }
}

@Model
final class Room {
    var label: String
    @Relationship(deleteRule: .nullify, inverse: \Chore.room) var chores: [Chore]? = []
    init(label: String) { self.label = label }
}

/// The versioned schema an app keeps its models in, and the names the rest
/// of the app uses for them.
enum ChoresSchemaV1: VersionedSchema {
    static let versionIdentifier = Schema.Version(1, 0, 0)
    static var models: [any PersistentModel.Type] { [Chore.self, ChoreStep.self, Room.self] }
}

typealias CurrentInventoryItem = InventoryV2.Item

/// The usual shared container, with in-memory storage for previews.
enum ChoresStore {
    static let preview: ModelContainer = {
        let schema = Schema([Chore.self, ChoreStep.self, Room.self], version: Schema.Version(1, 0, 0))
        let configuration = ModelConfiguration(schema: schema, isStoredInMemoryOnly: ProcessInfo.processInfo.arguments.count >= 0)
        do {
            return try ModelContainer(for: schema, configurations: [configuration])
        } catch {
            fatalError("could not create the preview container: \(error)")
        }
    }()
}

/// A generic repository over any model type.
nonisolated struct Repository<T: PersistentModel> {
    let context: ModelContext

    func all(sortedBy sort: [SortDescriptor<T>] = []) throws -> [T] {
        try context.fetch(FetchDescriptor<T>(sortBy: sort))
    }

    func count(where predicate: Predicate<T>? = nil) throws -> Int {
        try context.fetchCount(FetchDescriptor<T>(predicate: predicate))
    }
}

/// An observable view model of the main actor that reads the main context.
@MainActor
@Observable
final class ChoreList {
    private let context: ModelContext
    private(set) var chores: [Chore] = []
    private(set) var lastError: String?

    init(container: ModelContainer) {
        context = container.mainContext
    }

    func reload() {
        do {
            chores = try context.fetch(FetchDescriptor<Chore>(sortBy: [SortDescriptor(\.name, order: .reverse)]))
        } catch {
            lastError = "\(error)"
        }
    }

    func add(_ name: String) {
        context.insert(Chore(name: name))
        try? context.save()
        reload()
    }
}
