// em-qf-client: a QuickFIX (C++) initiator driven line by line from stdin,
// for the FIX gateway's interoperability tests (test_fix_quickfix.py).
// Built only for the tests.
//
//   em-qf-client HOST PORT SENDER TARGET PASSWORD HEARTBTINT STORE_DIR RESET(Y|N)
//
// Commands on stdin, one per line:
//   send TYPE tag=value|tag=value|...   an application or admin message
//   next_target N                       the MsgSeqNum QuickFIX expects next
//                                       (lower than the truth: it asks a resend)
//   quit                                log out and stop
// Everything QuickFIX reports goes to stdout, one line each, SOH as '|':
//   LOGON / LOGOUT                      session events
//   IN <message>   / OUT <message>      every message received / sent
//   APP <message>                       an application message delivered
//   EVENT <text>                        QuickFIX's own session log
#include <quickfix/Application.h>
#include <quickfix/FileStore.h>
#include <quickfix/Log.h>
#include <quickfix/Message.h>
#include <quickfix/Session.h>
#include <quickfix/SessionSettings.h>
#include <quickfix/SocketInitiator.h>

#include <algorithm>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>

static std::mutex out_mu;

static void emit(const std::string &kind, std::string text)
{
    std::replace(text.begin(), text.end(), '\001', '|');
    std::lock_guard<std::mutex> lock(out_mu);
    std::cout << kind << ' ' << text << std::endl;
}

class Printer : public FIX::Log {
  public:
    void clear() override {}
    void backup() override {}
    void onIncoming(const std::string &s) override { emit("IN", s); }
    void onOutgoing(const std::string &s) override { emit("OUT", s); }
    void onEvent(const std::string &s) override { emit("EVENT", s); }
};

class PrinterFactory : public FIX::LogFactory {
  public:
    FIX::Log *create() override { return new Printer; }
    FIX::Log *create(const FIX::SessionID &) override { return new Printer; }
    void destroy(FIX::Log *l) override { delete l; }
};

class App : public FIX::Application {
  public:
    std::string password;
    FIX::SessionID id;
    void onCreate(const FIX::SessionID &s) override { id = s; }
    void onLogon(const FIX::SessionID &) override { emit("LOGON", "-"); }
    void onLogout(const FIX::SessionID &) override { emit("LOGOUT", "-"); }
    void toAdmin(FIX::Message &m, const FIX::SessionID &) override
    {
        FIX::MsgType t;
        m.getHeader().getField(t);
        if (t.getValue() == "A" && !password.empty())
            m.setField(FIX::Password(password));
    }
    void toApp(FIX::Message &, const FIX::SessionID &) throw(FIX::DoNotSend) override {}
    void fromAdmin(const FIX::Message &, const FIX::SessionID &) throw(
        FIX::FieldNotFound, FIX::IncorrectDataFormat, FIX::IncorrectTagValue,
        FIX::RejectLogon) override
    {
    }
    void fromApp(const FIX::Message &m, const FIX::SessionID &) throw(
        FIX::FieldNotFound, FIX::IncorrectDataFormat, FIX::IncorrectTagValue,
        FIX::UnsupportedMessageType) override
    {
        emit("APP", m.toString());
    }
};

int main(int argc, char **argv)
{
    if (argc != 9) {
        std::cerr << "usage: em-qf-client HOST PORT SENDER TARGET PASSWORD HEARTBTINT STORE_DIR "
                     "RESET\n";
        return 2;
    }
    std::stringstream cfg;
    cfg << "[DEFAULT]\n"
        << "ConnectionType=initiator\nReconnectInterval=1\nStartTime=00:00:00\n"
        << "EndTime=00:00:00\nUseDataDictionary=N\nFileStorePath=" << argv[7] << "\n"
        << "ResetOnLogon=" << argv[8] << "\nValidateUserDefinedFields=N\n"
        << "[SESSION]\nBeginString=FIX.4.4\nSenderCompID=" << argv[3] << "\nTargetCompID=" << argv[4]
        << "\nSocketConnectHost=" << argv[1] << "\nSocketConnectPort=" << argv[2]
        << "\nHeartBtInt=" << argv[6] << "\n";
    try {
        FIX::SessionSettings settings(cfg);
        App app;
        app.password = argv[5];
        FIX::FileStoreFactory store(settings);
        PrinterFactory logs;
        FIX::SocketInitiator initiator(app, store, settings, logs);
        initiator.start();
        std::string line;
        while (std::getline(std::cin, line)) {
            std::istringstream in(line);
            std::string cmd;
            in >> cmd;
            if (cmd == "quit")
                break;
            if (cmd == "next_target") {
                int n;
                in >> n;
                FIX::Session *s = FIX::Session::lookupSession(app.id);
                if (s)
                    s->setNextTargetMsgSeqNum(n);
                emit("DONE", line);
                continue;
            }
            if (cmd != "send")
                continue;
            std::string type, fields;
            in >> type;
            std::getline(in, fields);
            FIX::Message m;
            m.getHeader().setField(FIX::MsgType(type));
            std::istringstream fs(fields);
            std::string f;
            while (std::getline(fs, f, '|')) {
                f.erase(0, f.find_first_not_of(' '));
                size_t eq = f.find('=');
                if (eq == std::string::npos)
                    continue;
                m.setField(std::stoi(f.substr(0, eq)), f.substr(eq + 1));
            }
            bool ok = FIX::Session::sendToTarget(m, app.id);
            emit(ok ? "SENT" : "NOTSENT", type);
        }
        initiator.stop();
    } catch (std::exception &e) {
        std::cerr << "em-qf-client: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
