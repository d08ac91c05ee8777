// strata-model-worker ROLE STORE ID COUNT OUTPUT
//
// A helper for the multi-process model-layer test: processes of an app
// sharing one store through `import Strata`.
//
// - `save`: COUNT saves, each upserting a customer by its unique email
//   (twenty emails among all writers) with a new order, and every tenth
//   one also deleting a customer, whose orders go with it (cascade); the
//   context's author is "writer<ID>". After each save returns it appends
//   "saved <i>" to OUTPUT.
// - `fetch`: fetches, through a read-only container, in one long-lived
//   context until OUTPUT + ".stop"
//   exists, checking that emails stay unique; then appends "final <orders>
//   <customers>" to OUTPUT.
import Foundation
import Strata

func fail(_ text: String) -> Never {
    FileHandle.standardError.write(Data("strata-model-worker: \(text)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 6, let id = Int(arguments[3]), let count = Int(arguments[4]) else {
    fail("usage: strata-model-worker save|fetch STORE ID COUNT OUTPUT")
}
let output = arguments[5]
_ = FileManager.default.createFile(atPath: output, contents: nil)
guard let out = FileHandle(forWritingAtPath: output) else { fail("cannot open \(output)") }
out.seekToEndOfFile()

do {
    // The fetching process opens the store read-only, as an extension
    // that only shows data would.
    var configuration = ModelConfiguration(url: URL(fileURLWithPath: arguments[2]), allowsSave: arguments[1] != "fetch")
    configuration.busyTimeout = .seconds(60)
    let container = try ModelContainer(for: Customer.self, Order.self, configurations: configuration)
    switch arguments[1] {
    case "save":
        for i in 0..<count {
            let context = ModelContext(container)
            context.author = "writer\(id)"
            try makeShopChange(i, writer: id, in: context)
            try context.save()
            out.write(Data("saved \(i)\n".utf8))
        }
    case "fetch":
        let context = ModelContext(container)
        while !FileManager.default.fileExists(atPath: output + ".stop") {
            let customers = try context.fetch(FetchDescriptor<Customer>())
            let emails = customers.map(\.email)
            guard Set(emails).count == emails.count else { fail("duplicate emails in one fetch: \(emails.sorted())") }
            _ = try context.fetchCount(FetchDescriptor<Order>())
            usleep(2000)
        }
        let orders = try context.fetchCount(FetchDescriptor<Order>())
        let customers = try context.fetch(FetchDescriptor<Customer>())
        let names = customers.sorted { $0.email < $1.email }.map { "\($0.email)=\($0.name)" }.joined(separator: ",")
        out.write(Data("final \(orders) \(customers.count) \(names)\n".utf8))
    default:
        fail("unknown role \(arguments[1])")
    }
} catch {
    fail("\(error)")
}
